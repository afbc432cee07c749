use std::collections::HashSet;
use std::sync::Arc;

use kubesched_framework::events::{ClusterEvent, EventObject};
use kubesched_framework::model::k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceSlice,
};
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubesched_framework::{FeatureGates, Handle, ObjectStore};
use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info};
use serde_json::{Value, json};

use super::*;
use crate::allocator::{Allocator, Features, NodeRef};
use crate::cel::{CelCache, DeviceValue, compile};
use crate::slices::{DeviceId, DeviceSet, SliceIndex};

const DRIVER: &str = "gpu.example.com";

fn de<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("test object decodes")
}

/// A slice of `node` with GPUs of the given memory sizes, named `gpu-0`, `gpu-1`, ...
fn gpu_slice(node: &str, memories: &[&str]) -> ResourceSlice {
    let devices: Vec<Value> = memories
        .iter()
        .enumerate()
        .map(|(i, m)| {
            json!({
                "name": format!("gpu-{i}"),
                "attributes": {
                    "model": {"string": if m.ends_with("80Gi") { "a100" } else { "t4" }},
                    "index": {"int": i},
                    "numa": {"int": i / 4},
                    "driverVersion": {"version": "1.2.3"},
                },
                "capacity": {"memory": {"value": m}},
            })
        })
        .collect();
    de(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {"driver": DRIVER, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }))
}

fn class(name: &str, selector: Option<&str>) -> DeviceClass {
    let selectors: Vec<Value> = selector
        .map(|s| vec![json!({"cel": {"expression": s}})])
        .unwrap_or_default();
    de(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": selectors, "config": [{"opaque": {"driver": DRIVER, "parameters": {"sharing": "none"}}}]},
    }))
}

fn claim(name: &str, devices: Value) -> ResourceClaim {
    de(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": "1"},
        "spec": {"devices": devices},
    }))
}

fn exactly(name: &str, count: i64, selector: Option<&str>) -> Value {
    let mut e = json!({"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count});
    if let Some(s) = selector {
        e["selectors"] = json!([{"cel": {"expression": s}}]);
    }
    json!({"name": name, "exactly": e})
}

fn one_request(count: i64, selector: Option<&str>) -> Value {
    json!({"requests": [exactly("gpu", count, selector)]})
}

struct Fixture {
    objects: Arc<ObjectStore>,
}

impl Fixture {
    fn new(slices: Vec<ResourceSlice>) -> Self {
        let objects = Arc::new(ObjectStore::default());
        objects
            .device_classes
            .upsert(class("gpu", Some(&format!("device.driver == '{DRIVER}'"))));
        for s in slices {
            objects.resource_slices.upsert(s);
        }
        Self { objects }
    }

    fn allocate(
        &self,
        claims: &[ResourceClaim],
        allocated: &[&str],
        node: &str,
    ) -> Result<Option<Vec<AllocationResult>>, String> {
        let claims: Vec<Arc<ResourceClaim>> = claims.iter().cloned().map(Arc::new).collect();
        let allocated: DeviceSet = allocated
            .iter()
            .map(|d| DeviceId::new(DRIVER, node, d))
            .collect();
        let index = Arc::new(SliceIndex::build(&self.objects.resource_slices));
        let class_of = |n: &str| self.objects.device_classes.get(None, n);
        let allocator = Allocator::new(
            Features::default(),
            &claims,
            Arc::new(allocated.into()),
            &class_of,
            index,
            &CelCache::default(),
        );
        let labels = Default::default();
        allocator.allocate(NodeRef {
            name: node,
            labels: &labels,
        })
    }

    /// The devices each claim got, as `request:device`.
    fn devices(&self, claims: &[ResourceClaim], allocated: &[&str]) -> Option<Vec<Vec<String>>> {
        let result = self
            .allocate(claims, allocated, "n1")
            .expect("no allocation error")?;
        Some(
            result
                .iter()
                .map(|a| {
                    a.devices
                        .as_ref()
                        .and_then(|d| d.results.as_ref())
                        .into_iter()
                        .flatten()
                        .map(|r| format!("{}:{}", r.request, r.device))
                        .collect()
                })
                .collect(),
        )
    }
}

fn eight_gpus() -> Fixture {
    Fixture::new(vec![gpu_slice(
        "n1",
        &[
            "40Gi", "40Gi", "40Gi", "40Gi", "80Gi", "80Gi", "80Gi", "80Gi",
        ],
    )])
}

#[test]
fn counts_and_already_allocated_devices() {
    let f = eight_gpus();
    let c = |n| claim("c", one_request(n, None));
    assert_eq!(
        f.devices(&[c(1)], &[]),
        Some(vec![vec!["gpu:gpu-0".to_string()]])
    );
    assert_eq!(
        f.devices(&[c(2)], &["gpu-0", "gpu-2"]),
        Some(vec![vec!["gpu:gpu-1".to_string(), "gpu:gpu-3".to_string()]]),
        "devices of other claims are skipped"
    );
    assert_eq!(f.devices(&[c(8)], &[]).map(|r| r[0].len()), Some(8));
    assert_eq!(f.devices(&[c(9)], &[]), None, "more than the node has");
    assert_eq!(f.devices(&[c(7)], &["gpu-5", "gpu-6"]), None);
    // Two claims of one pod never share a device.
    let both = f.devices(
        &[
            claim("a", one_request(4, None)),
            claim("b", one_request(4, None)),
        ],
        &[],
    );
    let both = both.expect("fits");
    let all: HashSet<&String> = both.iter().flatten().collect();
    assert_eq!(all.len(), 8);
    assert_eq!(
        f.devices(
            &[
                claim("a", one_request(5, None)),
                claim("b", one_request(4, None))
            ],
            &[]
        ),
        None
    );
}

#[test]
fn all_mode_takes_every_matching_device() {
    let f = eight_gpus();
    let all = |sel: Option<&str>| {
        let mut e = json!({"deviceClassName": "gpu", "allocationMode": "All"});
        if let Some(s) = sel {
            e["selectors"] = json!([{"cel": {"expression": s}}]);
        }
        claim("c", json!({"requests": [{"name": "all", "exactly": e}]}))
    };
    assert_eq!(f.devices(&[all(None)], &[]).map(|r| r[0].len()), Some(8));
    let big = "device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) >= 0";
    assert_eq!(
        f.devices(&[all(Some(big))], &[]),
        Some(vec![(4..8).map(|i| format!("all:gpu-{i}")).collect()])
    );
    assert_eq!(
        f.devices(&[all(Some(big))], &["gpu-5"]),
        None,
        "one of them is taken"
    );
    assert_eq!(
        f.devices(
            &[all(Some(
                "device.attributes['gpu.example.com'].model == 'h100'"
            ))],
            &[]
        ),
        None,
        "all of nothing does not allocate"
    );
}

#[test]
fn cel_selectors_over_attributes_and_capacity() {
    let f = eight_gpus();
    let pick = |sel: &str| f.devices(&[claim("c", one_request(1, Some(sel)))], &[]);
    assert_eq!(
        pick("device.attributes['gpu.example.com'].model == 'a100'"),
        Some(vec![vec!["gpu:gpu-4".to_string()]])
    );
    assert_eq!(
        pick("device.attributes['gpu.example.com'].index > 5"),
        Some(vec![vec!["gpu:gpu-6".to_string()]])
    );
    assert_eq!(
        pick("device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('40Gi'))"),
        Some(vec![vec!["gpu:gpu-4".to_string()]])
    );
    assert_eq!(
        pick("device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.0.0'))"),
        Some(vec![vec!["gpu:gpu-0".to_string()]])
    );
    assert_eq!(
        pick("device.attributes['other.example.com'].size() == 0"),
        Some(vec![vec!["gpu:gpu-0".to_string()]]),
        "an unknown domain is an empty map"
    );
    assert_eq!(pick("device.driver == 'other.example.com'"), None);
    // A missing attribute is a runtime error, which stops allocation.
    let err = f
        .allocate(
            &[claim(
                "c",
                one_request(1, Some("device.attributes['gpu.example.com'].nope == 1")),
            )],
            &[],
            "n1",
        )
        .expect_err("runtime error");
    assert!(err.contains("CEL runtime error"), "{err}");
    assert!(
        err.starts_with("claim default/c: selector #0 on device gpu.example.com/n1/gpu-0"),
        "{err}"
    );
    let err = f
        .allocate(
            &[claim("c", one_request(1, Some("device.driver ==")))],
            &[],
            "n1",
        )
        .expect_err("compile error");
    assert!(err.contains("CEL compile error"), "{err}");
}

#[test]
fn match_attribute_constraints() {
    // numa 0: gpu-0..3, numa 1: gpu-4..7; gpu-1, 2, 3 and 4 are taken.
    let f = eight_gpus();
    let c = json!({
        "requests": [exactly("a", 1, None), exactly("b", 2, None)],
        "constraints": [{"matchAttribute": "gpu.example.com/numa"}],
    });
    assert_eq!(
        f.devices(
            &[claim("c", c.clone())],
            &["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
        ),
        Some(vec![vec![
            "a:gpu-5".into(),
            "b:gpu-6".into(),
            "b:gpu-7".into()
        ]]),
        "gpu-0 would leave no partner on numa 0: the search backtracks"
    );
    assert_eq!(
        f.devices(&[claim("c", c)], &["gpu-1", "gpu-2", "gpu-4", "gpu-5"]),
        None
    );
    // A constraint limited to one request leaves the other free.
    let c = json!({
        "requests": [exactly("a", 2, None), exactly("b", 1, None)],
        "constraints": [{"matchAttribute": "gpu.example.com/numa", "requests": ["a"]}],
    });
    assert_eq!(
        f.devices(
            &[claim("c", c)],
            &["gpu-0", "gpu-1", "gpu-2", "gpu-4", "gpu-5", "gpu-6"]
        ),
        None,
        "a needs two on one numa node, only gpu-3 and gpu-7 are left"
    );
    // An attribute the device lacks fails the constraint.
    let c = json!({
        "requests": [exactly("a", 1, None)],
        "constraints": [{"matchAttribute": "gpu.example.com/missing"}],
    });
    assert_eq!(f.devices(&[claim("c", c)], &[]), None);
}

#[test]
fn first_available_picks_the_first_alternative_that_fits() {
    let f = eight_gpus();
    let c = || {
        claim(
            "c",
            json!({"requests": [{"name": "gpu", "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu", "count": 2,
                 "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'a100'"}}]},
                {"name": "small", "deviceClassName": "gpu", "count": 4},
            ]}]}),
        )
    };
    assert_eq!(
        f.devices(&[c()], &[]),
        Some(vec![vec!["gpu/big:gpu-4".into(), "gpu/big:gpu-5".into()]])
    );
    assert_eq!(
        f.devices(&[c()], &["gpu-4", "gpu-5", "gpu-6"]),
        Some(vec![(0..4).map(|i| format!("gpu/small:gpu-{i}")).collect()])
    );
    assert_eq!(
        f.devices(&[c()], &["gpu-0", "gpu-4", "gpu-5", "gpu-6"]),
        Some(vec![
            ["gpu-1", "gpu-2", "gpu-3", "gpu-7"]
                .iter()
                .map(|d| format!("gpu/small:{d}"))
                .collect()
        ])
    );
    assert_eq!(
        f.devices(&[c()], &["gpu-0", "gpu-1", "gpu-4", "gpu-5", "gpu-6"]),
        None
    );
}

#[test]
fn admin_access_may_share_devices_in_use() {
    let f = eight_gpus();
    let c = claim(
        "c",
        json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 8, "adminAccess": true}}]}),
    );
    let all_taken: Vec<String> = (0..8).map(|i| format!("gpu-{i}")).collect();
    let taken: Vec<&str> = all_taken.iter().map(String::as_str).collect();
    let result = f
        .allocate(&[c], &taken, "n1")
        .expect("no error")
        .expect("fits");
    let r = &result[0]
        .devices
        .as_ref()
        .expect("devices")
        .results
        .as_ref()
        .expect("results")[0];
    assert_eq!(r.admin_access, Some(true));
}

#[test]
fn results_carry_configs_and_node_selector() {
    let f = eight_gpus();
    let result = f
        .allocate(&[claim("c", one_request(1, None))], &[], "n1")
        .expect("no error")
        .expect("fits");
    insta::assert_json_snapshot!("allocation_result", result);
}

#[test]
fn pools_incomplete_outdated_and_other_nodes() {
    let mut newer = gpu_slice("n1", &["40Gi", "40Gi"]);
    newer.metadata.name = Some("n1-newer".into());
    newer.spec.pool.generation = 2;
    let old = gpu_slice("n1", &["40Gi"; 8]);
    let f = Fixture::new(vec![old, newer]);
    assert_eq!(
        f.devices(&[claim("c", one_request(2, None))], &[])
            .map(|r| r[0].len()),
        Some(2)
    );
    assert_eq!(
        f.devices(&[claim("c", one_request(3, None))], &[]),
        None,
        "the old generation is ignored"
    );
    assert_eq!(
        f.allocate(&[claim("c", one_request(1, None))], &[], "n2")
            .expect("no error"),
        None,
        "other nodes see nothing"
    );
    let mut part = gpu_slice("n1", &["40Gi"]);
    part.spec.pool.resource_slice_count = 2;
    let f = Fixture::new(vec![part]);
    let all = claim(
        "c",
        json!({"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}),
    );
    let err = f.allocate(&[all], &[], "n1").expect_err("incomplete pool");
    assert!(err.contains("is currently being updated"), "{err}");
    assert_eq!(
        f.devices(&[claim("c", one_request(1, None))], &[]),
        None,
        "incomplete pools are skipped"
    );
}

#[test]
fn too_many_devices_is_an_error() {
    let f = eight_gpus();
    let err = f
        .allocate(&[claim("c", one_request(33, None))], &[], "n1")
        .expect_err("limit");
    assert_eq!(
        err,
        "claim default/c: number of requested devices 33 exceeds the claim limit of 32"
    );
}

#[test]
fn cel_functions_and_cost_limit() {
    let device = DeviceValue::new(
        DRIVER,
        Some(&de(
            json!({"model": {"string": "t4"}, "other.io/x": {"bool": true}}),
        )),
        Some(&de(json!({"memory": {"value": "16Gi"}}))),
    )
    .expect("device");
    let eval = |e: &str| compile(e).matches(&device);
    assert_eq!(
        eval("device.attributes['gpu.example.com'].model == 't4'"),
        Ok(true)
    );
    assert_eq!(eval("device.attributes['other.io'].x"), Ok(true));
    assert_eq!(
        eval("device.capacity['gpu.example.com'].memory == quantity('16Gi')"),
        Ok(true)
    );
    assert_eq!(
        eval("device.capacity['gpu.example.com'].memory.compareTo(quantity('17179869184')) == 0"),
        Ok(true)
    );
    assert_eq!(eval("quantity('1.5').isInteger()"), Ok(false));
    assert_eq!(eval("quantity('2k').asInteger() == 2000"), Ok(true));
    assert_eq!(
        eval("quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi')"),
        Ok(true)
    );
    assert_eq!(
        eval("semver('1.2.3-alpha').isLessThan(semver('1.2.3'))"),
        Ok(true)
    );
    assert_eq!(
        eval("semver('1.10.0').major() == 1 && semver('1.10.0').minor() == 10"),
        Ok(true)
    );
    assert_eq!(eval("isSemver('01.2.3')"), Ok(false));
    assert_eq!(eval("'gpu.example.com' in device.attributes"), Ok(true));
    assert!(eval("device.driver").is_err(), "a string is not a bool");
    let heavy = "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, true))))))";
    assert!(compile(heavy).max_cost > cel::CEL_SELECTOR_MAX_COST);
    assert_eq!(
        eval(heavy),
        Err("operation cancelled: actual cost limit exceeded".into())
    );
}

// ---- the plugin --------------------------------------------------------------------

fn plugin_on(objects: Arc<ObjectStore>) -> DynamicResources {
    let handle = Handle::builder().objects(objects).build();
    DynamicResources::new(&DynamicResourcesArgs::default(), &handle).expect("plugin")
}

fn pod_with_claim(claim_name: &str) -> PodBuilder {
    PodBuilder::new("p").uid("uid-p").with(|p| {
        p.spec.get_or_insert_with(Default::default).resource_claims = Some(vec![de(json!({
            "name": "gpus", "resourceClaimName": claim_name,
        }))]);
    })
}

fn store_with(nodes: &[&str], claims: Vec<ResourceClaim>) -> Arc<ObjectStore> {
    let f = Fixture::new(
        nodes
            .iter()
            .map(|n| gpu_slice(n, &["40Gi", "40Gi", "80Gi", "80Gi"]))
            .collect(),
    );
    for c in claims {
        f.objects.resource_claims.upsert(c);
    }
    f.objects
}

#[test]
fn filter_snapshot() {
    let big = "device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) >= 0";
    let mut allocated_elsewhere = claim("other", one_request(2, None));
    allocated_elsewhere.status = Some(de(json!({"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-2"},
        {"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-3"},
    ]}}})));
    let objects = store_with(
        &["n1", "n2"],
        vec![
            claim("two-big", one_request(2, Some(big))),
            allocated_elsewhere,
        ],
    );
    let nodes = vec![
        node_info(NodeBuilder::new("n1"), &[]),
        node_info(NodeBuilder::new("n2"), &[]),
        node_info(NodeBuilder::new("n3"), &[]),
    ];
    let run = PluginHarness::new(plugin_on(objects)).run(&pod_with_claim("two-big").info(), &nodes);
    insta::assert_yaml_snapshot!("filter_two_big_gpus", run);
    assert_eq!(run.feasible(), vec!["n1"]);
}

#[test]
fn pre_filter_and_pre_enqueue_messages() {
    let plugin = plugin_on(store_with(&["n1"], vec![]));
    let pod = pod_with_claim("missing").info();
    assert_eq!(
        plugin.pre_enqueue(&pod).reasons(),
        ["resourceclaim.resource.k8s.io \"missing\" not found"]
    );
    let templated = PodBuilder::new("p")
        .with(|p| {
            p.spec.get_or_insert_with(Default::default).resource_claims = Some(vec![de(
                json!({"name": "gpus", "resourceClaimTemplateName": "t"}),
            )]);
        })
        .info();
    let s = plugin.pre_enqueue(&templated);
    assert_eq!(
        s.code(),
        kubesched_framework::Code::UnschedulableAndUnresolvable
    );
    assert_eq!(
        s.reasons(),
        ["pod \"default/p\": ResourceClaim not created yet"]
    );
    assert!(
        plugin
            .pre_enqueue(&PodBuilder::new("plain").info())
            .is_success()
    );

    let mut c = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "nope"}}]}),
    );
    let objects = store_with(&["n1"], vec![c.clone()]);
    let plugin = plugin_on(objects.clone());
    let mut state = CycleState::new();
    let (_, s) = plugin.pre_filter(&mut state, &pod_with_claim("c").info(), &[]);
    assert_eq!(s.reasons(), ["request r: device class nope does not exist"]);

    c.metadata.deletion_timestamp = Some(Time(Default::default()));
    objects.resource_claims.upsert(c);
    let (_, s) = plugin.pre_filter(&mut state, &pod_with_claim("c").info(), &[]);
    assert_eq!(s.reasons(), ["resourceclaim \"c\" is being deleted"]);

    let (_, s) = plugin.pre_filter(&mut state, &PodBuilder::new("plain").info(), &[]);
    assert!(s.is_skip(), "pods without claims skip");
}

#[tokio::test]
async fn reserve_keeps_devices_in_flight_and_prebind_writes_the_claim() {
    let objects = store_with(
        &["n1"],
        vec![
            claim("a", one_request(4, None)),
            claim("b", one_request(1, None)),
        ],
    );
    let plugin = plugin_on(objects.clone());
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let pod_a = pod_with_claim("a").info();
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod_a, &nodes).1.is_success());
    assert!(plugin.filter(&state, &pod_a, &nodes[0]).is_success());
    assert!(plugin.reserve(&mut state, &pod_a, "n1").is_success());
    assert!(plugin.manager().has_pending_allocation("uid-a"));

    // Another pod now finds all four devices taken.
    let pod_b = PodBuilder::new("q").uid("uid-q").with(|p| {
        p.spec.get_or_insert_with(Default::default).resource_claims =
            Some(vec![de(json!({"name": "gpus", "resourceClaimName": "b"}))]);
    });
    let pod_b = pod_b.info();
    let mut state_b = CycleState::new();
    assert!(
        plugin
            .pre_filter(&mut state_b, &pod_b, &nodes)
            .1
            .is_success()
    );
    assert_eq!(
        plugin.filter(&state_b, &pod_b, &nodes[0]).reasons(),
        [ERR_REASON_CANNOT_ALLOCATE]
    );

    // PreBind writes through the client (NoopClient returns what it is given).
    let s = plugin.pre_bind(&state, &pod_a, "n1").await;
    assert!(s.is_success(), "{s:?}");
    assert!(!plugin.manager().has_pending_allocation("uid-a"));
    let DraState(inner) = state.read::<DraState>().expect("state");
    let written = inner.claims.lock()[0].clone();
    assert!(
        written
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.contains(&FINALIZER.to_string()))
    );
    let status = written.status.as_ref().expect("status");
    assert_eq!(
        status.reserved_for.as_ref().map(|r| r[0].uid.as_str()),
        Some("uid-p")
    );
    assert_eq!(
        status
            .allocation
            .as_ref()
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref())
            .map(Vec::len),
        Some(4)
    );

    // Unreserve of a pod whose allocation is still in flight frees the devices.
    let mut state_c = CycleState::new();
    let pod_c = pod_with_claim("a").info();
    objects
        .resource_claims
        .upsert(claim("a", one_request(4, None)));
    assert!(
        plugin
            .pre_filter(&mut state_c, &pod_c, &nodes)
            .1
            .is_success()
    );
    assert!(plugin.filter(&state_c, &pod_c, &nodes[0]).is_success());
    assert!(plugin.reserve(&mut state_c, &pod_c, "n1").is_success());
    plugin.unreserve(&mut state_c, &pod_c, "n1");
    assert!(!plugin.manager().has_pending_allocation("uid-a"));
}

#[tokio::test]
async fn allocated_claims_constrain_nodes_and_post_filter_deallocates() {
    let mut c = claim("c", one_request(1, None));
    c.status = Some(de(json!({"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
    }})));
    let plugin = plugin_on(store_with(&["n1", "n2"], vec![c]));
    let nodes = vec![
        node_info(NodeBuilder::new("n1"), &[]),
        node_info(NodeBuilder::new("n2"), &[]),
    ];
    let pod = pod_with_claim("c").info();
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    assert!(plugin.filter(&state, &pod, &nodes[0]).is_success());
    assert_eq!(
        plugin.filter(&state, &pod, &nodes[1]).reasons(),
        [ERR_REASON_NOT_AVAILABLE]
    );
    let framework = PluginHarness::new(plugin_on(Arc::new(ObjectStore::default()))).framework();
    let (_, s) = plugin
        .post_filter(&framework, &state, &pod, &NodeToStatus::default())
        .await;
    assert_eq!(s.reasons(), [MSG_DEALLOCATED]);

    let plain = PodBuilder::new("plain").info();
    let mut state = CycleState::new();
    let _ = plugin.pre_filter(&mut state, &plain, &nodes);
    let (_, s) = plugin
        .post_filter(&framework, &state, &plain, &NodeToStatus::default())
        .await;
    assert_eq!(s.reasons(), [MSG_NO_NEW_CLAIMS]);
}

#[test]
fn queueing_hints() {
    let objects = store_with(&["n1"], vec![claim("c", one_request(1, None))]);
    let plugin = plugin_on(objects);
    let events = plugin.events_to_register();
    let kinds: Vec<ClusterEvent> = events.iter().map(|e| e.event).collect();
    let add_update = ActionType::ADD.union(ActionType::UPDATE);
    assert_eq!(
        kinds,
        [
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD
                    .union(ActionType::UPDATE_NODE_LABEL)
                    .union(ActionType::UPDATE_NODE_ALLOCATABLE)
            ),
            ClusterEvent::new(EventResource::ResourceClaim, add_update),
            ClusterEvent::new(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM
            ),
            ClusterEvent::new(EventResource::DeviceClass, add_update),
            ClusterEvent::new(EventResource::ResourceSlice, add_update),
            ClusterEvent::new(
                EventResource::of::<
                    kubesched_framework::model::k8s_openapi::api::resource::v1::DeviceTaintRule,
                >(),
                add_update.union(ActionType::DELETE)
            ),
        ]
    );
    let hint = events[1].hint.as_ref().expect("claim hint");
    let pod = pod_with_claim("c").info();
    let obj = |c: ResourceClaim| EventObject::Object(Arc::new(c));
    let mine = claim("c", one_request(1, None));
    assert_eq!(
        hint(&pod, None, Some(&obj(mine.clone()))),
        Ok(QueueingHint::Queue),
        "created"
    );
    assert_eq!(
        hint(&pod, Some(&obj(mine.clone())), Some(&obj(mine.clone()))),
        Ok(QueueingHint::Skip),
        "status unchanged"
    );
    let other = claim("other", one_request(1, None));
    assert_eq!(
        hint(&pod, None, Some(&obj(other.clone()))),
        Ok(QueueingHint::Skip),
        "not the pod's"
    );
    let mut allocated = other.clone();
    allocated.status = Some(de(json!({"allocation": {}})));
    assert_eq!(
        hint(&pod, Some(&obj(allocated)), Some(&obj(other))),
        Ok(QueueingHint::Queue),
        "another claim was deallocated"
    );
    assert_eq!(
        hint(&pod, None, Some(&EventObject::Other)),
        Ok(QueueingHint::Queue)
    );
}

// ---- DynamicResourcesArgs ------------------------------------------------------------

fn args(v: Value) -> DynamicResourcesArgs {
    de(v)
}

const ALL_ON: ArgGates = ArgGates {
    filter_timeout: true,
    binding_conditions: true,
};

#[test]
fn args_are_validated_as_upstream_does() {
    let secs = std::time::Duration::from_secs;
    // (args, gates, the filter limit or upstream's error)
    type Case = (
        Value,
        ArgGates,
        Result<Option<std::time::Duration>, &'static str>,
    );
    let cases: Vec<Case> = vec![
        (json!({}), ALL_ON, Ok(Some(secs(10)))),
        (
            json!({"filterTimeout": "250ms"}),
            ALL_ON,
            Ok(Some(std::time::Duration::from_millis(250))),
        ),
        (json!({"filterTimeout": "0s"}), ALL_ON, Ok(None)),
        (
            json!({"filterTimeout": "-1s"}),
            ALL_ON,
            Err("filterTimeout: Invalid value: \"-1s\": must be zero or positive"),
        ),
        (json!({"bindingTimeout": "1s"}), ALL_ON, Ok(Some(secs(10)))),
        (
            json!({"bindingTimeout": "500ms"}),
            ALL_ON,
            Err("bindingTimeout: Invalid value: \"500ms\": must be at least 1 second"),
        ),
        (
            json!({"bindingTimeout": "5m"}),
            ArgGates {
                binding_conditions: false,
                ..ALL_ON
            },
            Err(
                "bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled",
            ),
        ),
        (
            json!({"filterTimeout": "5s"}),
            ArgGates {
                filter_timeout: false,
                ..ALL_ON
            },
            Err("filterTimeout: Forbidden: DRASchedulingFilterTimeout feature gate is disabled"),
        ),
        (
            json!({}),
            ArgGates {
                filter_timeout: false,
                ..ALL_ON
            },
            Ok(None),
        ),
        (
            json!({"filterTimeout": "-2s", "bindingTimeout": "0s"}),
            ALL_ON,
            Err(
                "[filterTimeout: Invalid value: \"-2s\": must be zero or positive, bindingTimeout: Invalid value: \"0s\": must be at least 1 second]",
            ),
        ),
    ];
    for (raw, gates, want) in cases {
        let got = args(raw.clone()).filter_limit(gates);
        assert_eq!(got, want.map_err(str::to_string), "{raw}");
    }
}

#[test]
fn args_are_defaulted_under_the_gates_in_effect() {
    let desc = kubesched_framework::registry::find(NAME).expect("registered");
    let effective = |raw: Option<Value>, gates: &FeatureGates| {
        let mut v = (desc.args.decode)(raw.as_ref(), gates)
            .map_err(|e| e.message)?
            .effective
            .expect("args kind");
        let m = v.as_object_mut().expect("object");
        m.remove("apiVersion");
        m.remove("kind");
        Ok::<_, String>(v)
    };
    let v1_37 = FeatureGates::defaults();
    // v1.37's /configz: both defaults (bindingTimeout's since DRADeviceBindingConditions
    // went on by default in 1.36).
    assert_eq!(
        effective(None, &v1_37),
        Ok(json!({"filterTimeout": "10s", "bindingTimeout": "10m0s"}))
    );
    assert_eq!(
        effective(
            Some(json!({"filterTimeout": "1m30s", "bindingTimeout": "10m"})),
            &v1_37
        ),
        Ok(json!({"filterTimeout": "1m30s", "bindingTimeout": "10m0s"}))
    );
    // v1.35: binding conditions were alpha and off, so no bindingTimeout is filled in, and
    // one that is set is refused (whatever its value, as upstream).
    let v1_35 = FeatureGates::defaults_at(kubesched_framework::Version::V1_35);
    assert_eq!(effective(None, &v1_35), Ok(json!({"filterTimeout": "10s"})));
    assert_eq!(
        effective(Some(json!({"bindingTimeout": "10m0s"})), &v1_35),
        Err("invalid DynamicResourcesArgs: bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled".into())
    );
    // The filter timeout's gate off: nothing filled in, no limit.
    let no_filter_timeout =
        FeatureGates::parse(["DRASchedulerFilterTimeout=false"]).expect("known gate");
    assert_eq!(
        effective(None, &no_filter_timeout),
        Ok(json!({"bindingTimeout": "10m0s"}))
    );
    assert_eq!(
        args(json!({})).filter_limit(ArgGates::of(&no_filter_timeout)),
        Ok(None)
    );
    assert!(
        serde_json::from_value::<DynamicResourcesArgs>(json!({"filterTimeOut": "1s"})).is_err()
    );
}

#[test]
fn a_search_past_its_filter_timeout_is_an_error_naming_the_node() {
    let objects = store_with(&["n1"], vec![claim("c", one_request(2, None))]);
    let handle = Handle::builder().objects(objects).build();
    let plugin =
        DynamicResources::new(&args(json!({"filterTimeout": "1ns"})), &handle).expect("plugin");
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let pod = pod_with_claim("c").info();
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    let status = plugin.filter(&state, &pod, &nodes[0]);
    assert_eq!(
        status.code(),
        kubesched_framework::Code::Error,
        "{status:?}"
    );
    assert_eq!(
        status.reasons(),
        ["node n1: timed out trying to allocate devices"]
    );
    // Without a limit the same search succeeds.
    let unlimited =
        DynamicResources::new(&args(json!({"filterTimeout": "0s"})), &handle).expect("plugin");
    let mut state = CycleState::new();
    assert!(
        unlimited
            .pre_filter(&mut state, &pod, &nodes)
            .1
            .is_success()
    );
    assert!(unlimited.filter(&state, &pod, &nodes[0]).is_success());
}

// ---- device taints (DRADeviceTaints, GA in v1.37) -------------------------------------

/// Two GPUs on n1: gpu-0 tainted with `effect`, gpu-1 clean.
fn tainted_pair(effect: &str) -> Fixture {
    let mut slice = gpu_slice("n1", &["40Gi", "40Gi"]);
    let devices = slice.spec.devices.as_mut().expect("devices");
    devices[0].taints = Some(vec![de(json!({
        "key": "example.com/unhealthy", "value": "ecc", "effect": effect,
    }))]);
    Fixture::new(vec![slice])
}

fn tolerating(count: i64, toleration: Value) -> Value {
    let mut r = exactly("gpu", count, None);
    r["exactly"]["tolerations"] = json!([toleration]);
    json!({"requests": [r]})
}

#[test]
fn tainted_devices_go_only_to_requests_that_tolerate_them() {
    let one = claim("c", one_request(1, None));
    let two = claim("c", one_request(2, None));
    for effect in ["NoSchedule", "NoExecute"] {
        let f = tainted_pair(effect);
        // The clean device is taken; both are not to be had without a toleration.
        assert_eq!(
            f.devices(std::slice::from_ref(&one), &[]),
            Some(vec![vec!["gpu:gpu-1".into()]]),
            "{effect}"
        );
        assert_eq!(f.devices(std::slice::from_ref(&two), &[]), None, "{effect}");
        let cases = [
            (
                json!({"key": "example.com/unhealthy", "operator": "Exists"}),
                true,
            ),
            (json!({"operator": "Exists"}), true),
            (
                json!({"key": "example.com/unhealthy", "value": "ecc"}),
                true,
            ),
            (
                json!({"key": "example.com/unhealthy", "operator": "Equal", "value": "other"}),
                false,
            ),
            (
                json!({"key": "example.com/unhealthy", "operator": "Exists", "effect": effect}),
                true,
            ),
            (
                json!({"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSomething"}),
                false,
            ),
            (
                json!({"key": "example.com/other", "operator": "Exists"}),
                false,
            ),
        ];
        for (toleration, fits) in cases {
            let c = claim("c", tolerating(2, toleration.clone()));
            assert_eq!(
                f.devices(&[c], &[]).is_some(),
                fits,
                "{effect} {toleration}"
            );
        }
    }
    // A taint with effect None only informs.
    let f = tainted_pair("None");
    assert!(f.devices(&[two], &[]).is_some());
}

#[test]
fn taints_are_ignored_with_device_taints_off() {
    let f = tainted_pair("NoSchedule");
    let claims = vec![Arc::new(claim("c", one_request(2, None)))];
    let index = Arc::new(SliceIndex::build(&f.objects.resource_slices));
    let class_of = |n: &str| f.objects.device_classes.get(None, n);
    let off = Features {
        device_taints: false,
        ..Features::default()
    };
    let allocator = Allocator::new(
        off,
        &claims,
        Arc::new(DeviceSet::default().into()),
        &class_of,
        index,
        &CelCache::default(),
    );
    let labels = Default::default();
    let got = allocator.allocate(NodeRef {
        name: "n1",
        labels: &labels,
    });
    assert!(matches!(got, Ok(Some(_))), "{got:?}");
}

#[test]
fn device_taint_rules_taint_the_devices_they_select() {
    let objects = store_with(&["n1"], vec![claim("c", one_request(4, None))]);
    let rule: kubesched_framework::model::k8s_openapi::api::resource::v1::DeviceTaintRule =
        de(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": "drain-gpu-0"},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": "n1", "device": "gpu-0"},
                "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
            },
        }));
    objects.of().upsert(rule);
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let pod = pod_with_claim("c").info();
    let plugin = plugin_on(objects.clone());
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    assert_eq!(
        plugin.filter(&state, &pod, &nodes[0]).reasons(),
        [ERR_REASON_CANNOT_ALLOCATE]
    );
    // With the rules gate off, the rule is not read.
    let handle = Handle::builder()
        .objects(objects)
        .features(
            kubesched_framework::features::FeatureGates::parse(["DRADeviceTaintRules=false"])
                .expect("settable"),
        )
        .build();
    let plugin = DynamicResources::new(&DynamicResourcesArgs::default(), &handle).expect("plugin");
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    assert!(plugin.filter(&state, &pod, &nodes[0]).is_success());
}

/// v1.36's prioritized-list score: a node that gives the first choice scores higher.
#[test]
fn nodes_giving_the_first_choice_of_a_prioritized_list_score_higher() {
    let objects = Arc::new(ObjectStore::default());
    objects
        .device_classes
        .upsert(class("gpu", Some(&format!("device.driver == '{DRIVER}'"))));
    objects
        .resource_slices
        .upsert(gpu_slice("big", &["80Gi", "80Gi"]));
    objects
        .resource_slices
        .upsert(gpu_slice("small", &["40Gi", "40Gi"]));
    objects.resource_claims.upsert(claim(
        "c",
        json!({"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "a100", "deviceClassName": "gpu", "count": 1,
             "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'a100'"}}]},
            {"name": "any", "deviceClassName": "gpu", "count": 1},
        ]}]}),
    ));
    let nodes = vec![
        node_info(NodeBuilder::new("big"), &[]),
        node_info(NodeBuilder::new("small"), &[]),
    ];
    let run = PluginHarness::new(plugin_on(objects)).run(&pod_with_claim("c").info(), &nodes);
    assert_eq!(run.feasible(), vec!["big", "small"]);
    let scores: Vec<(Option<i64>, Option<i64>)> = run
        .nodes
        .iter()
        .map(|n| (n.score, n.normalized_score))
        .collect();
    // 8 - 0 for the first subrequest, 8 - 1 for the second; normalized to 100 and 87.
    assert_eq!(scores, [(Some(8), Some(100)), (Some(7), Some(87))]);
}

/// v1.37's allocator features: partitionable devices, consumable capacity, binding
/// conditions.
mod v137;

/// DRA-backed extended resources (DRAExtendedResource, GA in v1.37).
mod extended;
