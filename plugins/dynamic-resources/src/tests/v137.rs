//! Table tests of the allocator features v1.37 turns on by default: partitionable
//! devices' shared counters (DRAPartitionableDevices), consumable capacity
//! (DRAConsumableCapacity) and binding conditions (DRADeviceBindingConditions), each
//! with the gate off as well.

use super::*;
use kubesched_framework::model::k8s_openapi::api::resource::v1::DeviceRequestAllocationResult;

/// A slice of pool `pool` (driver [`DRIVER`]) with the given spec fields merged in.
fn slice(name: &str, pool: &str, count: i64, spec: Value) -> ResourceSlice {
    let mut s = json!({
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
    });
    for (k, v) in spec.as_object().expect("spec is an object") {
        s[k] = v.clone();
    }
    de(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name}, "spec": s,
    }))
}

/// A device consuming `memory` from counter set `set`.
fn partition(name: &str, set: &str, memory: &str) -> Value {
    json!({
        "name": name,
        "attributes": {"size": {"string": memory}},
        "consumesCounters": [{"counterSet": set, "counters": {"memory": {"value": memory}}}],
    })
}

/// A counter set `name` with `memory`.
fn counter_set(name: &str, memory: &str) -> Value {
    json!({"name": name, "counters": {"memory": {"value": memory}}})
}

struct Case {
    slices: Vec<ResourceSlice>,
    /// Devices of other claims, as (pool, device).
    allocated: Vec<(&'static str, &'static str)>,
    /// Shared allocations of other claims: (pool, device, capacity name, consumed).
    shared: Vec<(&'static str, &'static str, &'static str, &'static str)>,
    features: Features,
    node: &'static str,
    labels: Vec<(&'static str, &'static str)>,
}

impl Case {
    fn new(slices: Vec<ResourceSlice>) -> Self {
        Self {
            slices,
            allocated: Vec::new(),
            shared: Vec::new(),
            features: Features::default(),
            node: "n1",
            labels: Vec::new(),
        }
    }

    fn allocated(mut self, devices: &[(&'static str, &'static str)]) -> Self {
        self.allocated = devices.to_vec();
        self
    }

    fn shared(
        mut self,
        shares: &[(&'static str, &'static str, &'static str, &'static str)],
    ) -> Self {
        self.shared = shares.to_vec();
        self
    }

    fn on(mut self, node: &'static str) -> Self {
        self.node = node;
        self
    }

    fn features(mut self, features: Features) -> Self {
        self.features = features;
        self
    }

    fn labels(mut self, labels: &[(&'static str, &'static str)]) -> Self {
        self.labels = labels.to_vec();
        self
    }

    fn allocate(&self, claims: &[ResourceClaim]) -> Result<Option<Vec<AllocationResult>>, String> {
        let f = Fixture::new(self.slices.clone());
        let claims: Vec<Arc<ResourceClaim>> = claims.iter().cloned().map(Arc::new).collect();
        let allocated: DeviceSet = self
            .allocated
            .iter()
            .map(|(pool, d)| DeviceId::new(DRIVER, pool, d))
            .collect();
        let mut state = crate::manager::AllocatedState::from(allocated);
        for (pool, device, name, q) in &self.shared {
            let id = DeviceId::new(DRIVER, pool, device);
            state.shared.insert(id.clone());
            let n = kubesched_framework::model::Quantity::parse(q)
                .expect("quantity")
                .nanos();
            *state
                .capacity
                .entry(id)
                .or_default()
                .entry((*name).to_string())
                .or_default() += n;
        }
        let index = Arc::new(SliceIndex::build(&f.objects.resource_slices));
        let class_of = |n: &str| f.objects.device_classes.get(None, n);
        let allocator = Allocator::new(
            self.features,
            &claims,
            Arc::new(state),
            &class_of,
            index,
            &CelCache::default(),
        );
        let labels: kubesched_framework::model::Labels = self
            .labels
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        allocator.allocate(NodeRef {
            name: self.node,
            labels: &labels,
        })
    }

    /// Each claim's devices as `pool/device`, or None when they do not all fit.
    fn devices(&self, claims: &[ResourceClaim]) -> Option<Vec<Vec<String>>> {
        let got = self.allocate(claims).expect("no allocation error")?;
        Some(got.iter().map(result_devices).collect())
    }
}

fn result_devices(a: &AllocationResult) -> Vec<String> {
    a.devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| format!("{}/{}", r.pool, r.device))
        .collect()
}

fn sel(expr: &str) -> Option<&str> {
    Some(expr)
}

fn some(devices: &[&[&str]]) -> Option<Vec<Vec<String>>> {
    Some(
        devices
            .iter()
            .map(|c| c.iter().map(|d| (*d).to_string()).collect())
            .collect(),
    )
}

fn partitions_off() -> Features {
    Features {
        partitionable_devices: false,
        ..Features::default()
    }
}

/// One GPU of 8Gi on n1 cut three ways: whole, two halves; the counter set lives in a
/// slice of its own, as v1.35 requires.
fn cut_gpu() -> Vec<ResourceSlice> {
    vec![
        slice(
            "n1-counters",
            "n1",
            2,
            json!({"nodeName": "n1", "sharedCounters": [counter_set("gpu-0", "8Gi")]}),
        ),
        slice(
            "n1-partitions",
            "n1",
            2,
            json!({"nodeName": "n1", "devices": [
                partition("whole", "gpu-0", "8Gi"),
                partition("half-a", "gpu-0", "4Gi"),
                partition("half-b", "gpu-0", "4Gi"),
            ]}),
        ),
    ]
}

const HALF: &str = "device.attributes['gpu.example.com'].size == '4Gi'";
const WHOLE: &str = "device.attributes['gpu.example.com'].size == '8Gi'";

#[test]
fn shared_counters_limit_the_partitions_of_a_device() {
    let half = |name| claim(name, one_request(1, sel(HALF)));
    let whole = claim("whole", one_request(1, sel(WHOLE)));
    type Row = (
        &'static str,
        Case,
        Vec<ResourceClaim>,
        Option<Vec<Vec<String>>>,
    );
    let rows: Vec<Row> = vec![
        (
            "a partition is allocated (v1.34's allocator never allocated one)",
            Case::new(cut_gpu()),
            vec![half("a")],
            some(&[&["n1/half-a"]]),
        ),
        (
            "two halves fill the counter set",
            Case::new(cut_gpu()),
            vec![half("a"), half("b")],
            some(&[&["n1/half-a"], &["n1/half-b"]]),
        ),
        (
            "a half and the whole do not fit together",
            Case::new(cut_gpu()),
            vec![half("a"), whole.clone()],
            None,
        ),
        (
            "an allocated half leaves no room for the whole device",
            Case::new(cut_gpu()).allocated(&[("n1", "half-b")]),
            vec![whole.clone()],
            None,
        ),
        (
            "an allocated half leaves the other half",
            Case::new(cut_gpu()).allocated(&[("n1", "half-a")]),
            vec![half("a")],
            some(&[&["n1/half-b"]]),
        ),
        (
            "the whole device alone fits",
            Case::new(cut_gpu()),
            vec![whole.clone()],
            some(&[&["n1/whole"]]),
        ),
        (
            "gate off: slices with counter sets are left out, devices consuming counters never allocated",
            Case::new(cut_gpu()).features(partitions_off()),
            vec![half("a")],
            None,
        ),
    ];
    for (name, case, claims, want) in rows {
        assert_eq!(case.devices(&claims), want, "{name}");
    }
}

#[test]
fn counters_of_a_pool_span_its_nodes() {
    // One pool, three slices: the counters (for no node in particular), n1's and n2's
    // partitions of the same counter set.
    let pool = || {
        vec![
            slice(
                "counters",
                "shared",
                3,
                json!({"allNodes": true, "sharedCounters": [counter_set("board", "8Gi")]}),
            ),
            slice(
                "n1-parts",
                "shared",
                3,
                json!({"nodeName": "n1", "devices": [partition("n1-part", "board", "4Gi")]}),
            ),
            slice(
                "n2-parts",
                "shared",
                3,
                json!({"nodeName": "n2", "devices": [
                    partition("n2-part-a", "board", "4Gi"),
                    partition("n2-part-b", "board", "4Gi"),
                ]}),
            ),
        ]
    };
    let c = claim("c", one_request(1, None));
    assert_eq!(
        Case::new(pool()).devices(std::slice::from_ref(&c)),
        some(&[&["shared/n1-part"]]),
        "the pool is complete though n2's slice has nothing for n1"
    );
    assert_eq!(
        Case::new(pool())
            .allocated(&[("shared", "n2-part-a")])
            .devices(std::slice::from_ref(&c)),
        some(&[&["shared/n1-part"]])
    );
    assert_eq!(
        Case::new(pool())
            .allocated(&[("shared", "n2-part-a"), ("shared", "n2-part-b")])
            .devices(std::slice::from_ref(&c)),
        None,
        "devices allocated on n2 used up the counters n1's device needs"
    );
    let mut incomplete = pool();
    incomplete.remove(2);
    assert_eq!(
        Case::new(incomplete).devices(std::slice::from_ref(&c)),
        None,
        "a slice of the pool is missing"
    );
    let mut newer = pool();
    newer[2] = slice(
        "n2-parts",
        "shared",
        1,
        json!({"nodeName": "n2", "devices": [{"name": "plain"}]}),
    );
    newer[2].spec.pool.generation = 2;
    assert_eq!(
        Case::new(newer).devices(std::slice::from_ref(&c)),
        None,
        "a newer generation elsewhere makes the pool obsolete"
    );
}

#[test]
fn per_device_node_selection() {
    let slices = || {
        vec![slice(
            "fabric",
            "fabric",
            1,
            json!({"perDeviceNodeSelection": true, "devices": [
                {"name": "on-n2", "nodeName": "n2"},
                {"name": "on-n1", "nodeName": "n1"},
                {"name": "zone-a", "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]}]}]}},
                {"name": "anywhere", "allNodes": true},
            ]}),
        )]
    };
    let one = claim("c", one_request(1, None));
    let all = claim(
        "c",
        json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}),
    );
    let got = Case::new(slices())
        .allocate(std::slice::from_ref(&one))
        .expect("no error")
        .expect("fits");
    assert_eq!(result_devices(&got[0]), ["fabric/on-n1"]);
    let pinned = serde_json::to_value(&got[0].node_selector).expect("json");
    assert_eq!(
        pinned,
        json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}),
        "a device for one node pins the allocation to it"
    );
    assert_eq!(
        Case::new(slices())
            .on("n3")
            .labels(&[("zone", "a")])
            .devices(std::slice::from_ref(&all)),
        some(&[&["fabric/zone-a", "fabric/anywhere"]]),
        "only the devices reachable from n3"
    );
    let got = Case::new(slices())
        .on("n3")
        .labels(&[("zone", "a")])
        .allocate(std::slice::from_ref(&one))
        .expect("no error")
        .expect("fits");
    assert_eq!(
        serde_json::to_value(&got[0].node_selector).expect("json"),
        json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}]}),
        "the device's own node selector"
    );
    assert_eq!(
        Case::new(slices())
            .on("n4")
            .devices(std::slice::from_ref(&all)),
        some(&[&["fabric/anywhere"]])
    );
    assert_eq!(
        Case::new(slices())
            .features(partitions_off())
            .devices(std::slice::from_ref(&one)),
        None,
        "gate off: the slice is left out"
    );
}

#[test]
fn invalid_counters_make_the_pool_invalid() {
    let with_devices = |devices: Value, sets: Value| {
        vec![
            slice(
                "n1-counters",
                "n1",
                2,
                json!({"nodeName": "n1", "sharedCounters": sets}),
            ),
            slice(
                "n1-parts",
                "n1",
                2,
                json!({"nodeName": "n1", "devices": devices}),
            ),
        ]
    };
    let c = claim("c", one_request(1, None));
    let rows = [
        (
            "counter set missing",
            with_devices(
                json!([partition("p", "nope", "1Gi")]),
                json!([counter_set("gpu-0", "8Gi")]),
            ),
        ),
        (
            "counter missing",
            with_devices(
                json!([{"name": "p", "consumesCounters": [{"counterSet": "gpu-0", "counters": {"cores": {"value": "1"}}}]}]),
                json!([counter_set("gpu-0", "8Gi")]),
            ),
        ),
        (
            "duplicate counter set",
            with_devices(
                json!([partition("p", "gpu-0", "1Gi")]),
                json!([counter_set("gpu-0", "8Gi"), counter_set("gpu-0", "4Gi")]),
            ),
        ),
        (
            "a counter value that is not a quantity",
            with_devices(
                json!([partition("p", "gpu-0", "lots")]),
                json!([counter_set("gpu-0", "8Gi")]),
            ),
        ),
    ];
    for (name, slices) in rows {
        assert_eq!(
            Case::new(slices).allocate(std::slice::from_ref(&c)),
            Err(crate::allocator::INVALID_POOLS.to_string()),
            "{name}"
        );
    }
}

#[test]
fn filter_reports_invalid_pools_as_unschedulable_on_the_node() {
    let f = Fixture::new(vec![
        slice(
            "n1-counters",
            "n1",
            2,
            json!({"nodeName": "n1", "sharedCounters": [counter_set("gpu-0", "8Gi")]}),
        ),
        slice(
            "n1-parts",
            "n1",
            2,
            json!({"nodeName": "n1", "devices": [partition("p", "nope", "1Gi")]}),
        ),
    ]);
    f.objects
        .resource_claims
        .upsert(claim("c", one_request(1, None)));
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let run =
        PluginHarness::new(plugin_on(f.objects.clone())).run(&pod_with_claim("c").info(), &nodes);
    let status = run.filter_of("n1").expect("n1 filtered");
    assert_eq!(status.code, "UnschedulableAndUnresolvable");
    assert_eq!(status.reasons, [crate::allocator::INVALID_POOLS]);
}

/// The plugin under an emulated release's default gates.
fn plugin_at(objects: Arc<ObjectStore>, version: kubesched_framework::Version) -> DynamicResources {
    let handle = Handle::builder()
        .objects(objects)
        .features(kubesched_framework::FeatureGates::defaults_at(version))
        .build();
    DynamicResources::new(&DynamicResourcesArgs::default(), &handle).expect("plugin")
}

#[test]
fn emulated_v1_35_does_not_allocate_partitions() {
    let f = Fixture::new(cut_gpu());
    f.objects
        .resource_claims
        .upsert(claim("c", one_request(1, sel(HALF))));
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let pod = pod_with_claim("c").info();
    let now = PluginHarness::new(plugin_on(f.objects.clone())).run(&pod, &nodes);
    assert_eq!(now.feasible(), vec!["n1"]);
    let old = PluginHarness::new(plugin_at(
        f.objects.clone(),
        kubesched_framework::Version::V1_35,
    ))
    .run(&pod, &nodes);
    assert!(old.feasible().is_empty(), "{old:?}");
}

// ---- consumable capacity -------------------------------------------------------------

/// Two NICs on n1 of 10G bandwidth each, shared by whoever asks, in steps of 1G from 1G.
fn shared_nics() -> Vec<ResourceSlice> {
    let nic = |name: &str, port: i64| {
        json!({
            "name": name,
            "allowMultipleAllocations": true,
            "attributes": {"port": {"int": port}},
            "capacity": {"bandwidth": {"value": "10G", "requestPolicy": {
                "default": "1G", "validRange": {"min": "1G", "step": "1G"}}}},
        })
    };
    vec![slice(
        "n1-nics",
        "n1",
        1,
        json!({"nodeName": "n1", "devices": [nic("nic-0", 0), nic("nic-1", 1)]}),
    )]
}

/// A request for one device with capacity requests.
fn bandwidth(name: &str, amount: &str) -> Value {
    json!({"name": name, "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"bandwidth": amount}}}})
}

fn results(a: &AllocationResult) -> Vec<DeviceRequestAllocationResult> {
    a.devices
        .as_ref()
        .and_then(|d| d.results.clone())
        .unwrap_or_default()
}

#[test]
fn shared_devices_take_several_requests_within_their_capacity() {
    let c = |name, amount| claim(name, json!({"requests": [bandwidth("nic", amount)]}));
    let one_nic = || {
        let mut s = shared_nics();
        if let Some(d) = s[0].spec.devices.as_mut() {
            d.truncate(1);
        }
        s
    };
    type Row = (
        &'static str,
        Case,
        Vec<ResourceClaim>,
        Option<Vec<Vec<String>>>,
    );
    let rows: Vec<Row> = vec![
        (
            "two claims share one NIC (v1.34's allocator gave each its own)",
            Case::new(one_nic()),
            vec![c("a", "3G"), c("b", "2500M")],
            some(&[&["n1/nic-0"], &["n1/nic-0"]]),
        ),
        (
            "3G, then 2500M rounded up to 3G, then 5G is one too many",
            Case::new(one_nic()),
            vec![c("a", "3G"), c("b", "2500M"), c("c", "5G")],
            None,
        ),
        (
            "shares of other claims count",
            Case::new(one_nic()).shared(&[("n1", "nic-0", "bandwidth", "8G")]),
            vec![c("a", "3G")],
            None,
        ),
        (
            "what they leave is there",
            Case::new(one_nic()).shared(&[("n1", "nic-0", "bandwidth", "8G")]),
            vec![c("a", "2G")],
            some(&[&["n1/nic-0"]]),
        ),
        (
            "a request for a capacity the device lacks",
            Case::new(one_nic()),
            vec![claim(
                "a",
                json!({"requests": [{"name": "nic", "exactly": {"deviceClassName": "gpu",
                    "capacity": {"requests": {"memory": "1G"}}}}]}),
            )],
            None,
        ),
        (
            "the next device when the first is full",
            Case::new(shared_nics()).shared(&[("n1", "nic-0", "bandwidth", "10G")]),
            vec![c("a", "1G")],
            some(&[&["n1/nic-1"]]),
        ),
        (
            "a device allocated whole is not shared",
            Case::new(shared_nics()).allocated(&[("n1", "nic-0")]),
            vec![c("a", "1G")],
            some(&[&["n1/nic-1"]]),
        ),
    ];
    for (name, case, claims, want) in rows {
        assert_eq!(case.devices(&claims), want, "{name}");
    }
}

#[test]
fn shared_allocations_record_share_and_consumed_capacity() {
    let got = Case::new(shared_nics())
        .allocate(&[claim(
            "a",
            json!({"requests": [bandwidth("nic", "2500M"), {"name": "plain", "exactly": {"deviceClassName": "gpu"}}]}),
        )])
        .expect("no error")
        .expect("fits");
    let r = results(&got[0]);
    assert_eq!(r.len(), 2);
    let consumed = |i: usize| serde_json::to_value(&r[i].consumed_capacity).expect("json");
    assert_eq!(
        consumed(0),
        json!({"bandwidth": "3G"}),
        "rounded up to a step"
    );
    assert_eq!(
        consumed(1),
        json!({"bandwidth": "1G"}),
        "a request without capacity requests takes the default"
    );
    assert_eq!(r[0].device, "nic-0");
    assert_eq!(r[1].device, "nic-0", "the same NIC again, as another share");
    let (a, b) = (r[0].share_id.clone(), r[1].share_id.clone());
    assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
}

#[test]
fn distinct_attribute_keeps_shares_apart() {
    let two = |constraints: Value| {
        claim(
            "a",
            json!({"requests": [bandwidth("x", "1G"), bandwidth("y", "1G")], "constraints": constraints}),
        )
    };
    assert_eq!(
        Case::new(shared_nics()).devices(&[two(json!([]))]),
        some(&[&["n1/nic-0", "n1/nic-0"]])
    );
    assert_eq!(
        Case::new(shared_nics())
            .devices(&[two(json!([{"distinctAttribute": "gpu.example.com/port"}]))]),
        some(&[&["n1/nic-0", "n1/nic-1"]]),
        "no two devices with the same port"
    );
    assert_eq!(
        Case::new(shared_nics())
            .features(Features {
                consumable_capacity: false,
                ..Features::default()
            })
            .allocate(&[claim(
                "a",
                json!({"requests": [{"name": "x", "exactly": {"deviceClassName": "gpu"}}],
                       "constraints": [{"distinctAttribute": "gpu.example.com/port"}]}),
            )]),
        Err(
            "claim default/a, constraint #0: empty constraint (unsupported constraint type?)"
                .into()
        ),
        "gate off: the constraint is unknown"
    );
}

#[test]
fn consumable_capacity_off() {
    let off = Case::new(shared_nics()).features(Features {
        consumable_capacity: false,
        ..Features::default()
    });
    assert_eq!(
        off.allocate(&[claim("c", json!({"requests": [bandwidth("nic", "1G")]}))]),
        Err("claim default/c, request nic: has capacity requests, but the DRAConsumableCapacity feature is disabled".into())
    );
    let plain = |name| claim(name, one_request(1, None));
    assert_eq!(
        off.devices(&[plain("a"), plain("b")]),
        some(&[&["n1/nic-0"], &["n1/nic-1"]]),
        "each claim gets a device of its own"
    );
    let off = off.shared(&[("n1", "nic-0", "bandwidth", "1G")]);
    assert_eq!(
        off.devices(&[plain("a")]),
        some(&[&["n1/nic-1"]]),
        "a shared allocation counts as a whole one"
    );
}

#[test]
fn filter_counts_the_shares_of_allocated_claims() {
    let f = Fixture::new(shared_nics());
    let mut other = claim("other", json!({"requests": [bandwidth("nic", "9G")]}));
    other.status = Some(de(json!({"allocation": {"devices": {"results": [
        {"request": "nic", "driver": DRIVER, "pool": "n1", "device": "nic-0",
         "shareID": "6a1f0a1e-0000-4000-8000-000000000001", "consumedCapacity": {"bandwidth": "9G"}},
        {"request": "nic", "driver": DRIVER, "pool": "n1", "device": "nic-1",
         "shareID": "6a1f0a1e-0000-4000-8000-000000000002", "consumedCapacity": {"bandwidth": "9G"}},
    ]}}})));
    f.objects.resource_claims.upsert(other);
    f.objects.resource_claims.upsert(claim(
        "small",
        json!({"requests": [bandwidth("nic", "1G")]}),
    ));
    f.objects
        .resource_claims
        .upsert(claim("big", json!({"requests": [bandwidth("nic", "2G")]})));
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let plugin = || PluginHarness::new(plugin_on(f.objects.clone()));
    assert_eq!(
        plugin()
            .run(&pod_with_claim("small").info(), &nodes)
            .feasible(),
        vec!["n1"]
    );
    let big = plugin().run(&pod_with_claim("big").info(), &nodes);
    assert_eq!(
        big.filter_of("n1").map(|s| s.reasons.clone()),
        Some(vec![ERR_REASON_CANNOT_ALLOCATE.to_string()])
    );
    let old = PluginHarness::new(plugin_at(
        f.objects.clone(),
        kubesched_framework::Version::V1_35,
    ))
    .run(&pod_with_claim("small").info(), &nodes);
    let status = old.filter_of("n1").expect("filtered");
    assert_eq!(
        (status.code.as_str(), status.reasons.clone()),
        (
            "Error",
            vec!["claim default/small, request nic: has capacity requests, but the DRAConsumableCapacity feature is disabled".to_string()]
        ),
        "emulated v1.35: capacity requests are an error"
    );
}

#[test]
fn selectors_see_allow_multiple_allocations() {
    let pick = |expr: &str| claim("c", one_request(1, Some(expr)));
    let mut slices = shared_nics();
    let mut gpus = gpu_slice("n1", &["40Gi"]);
    gpus.spec.pool.name = "gpus".into();
    slices.push(gpus);
    let case = Case::new(slices);
    assert_eq!(
        case.devices(&[pick("device.allowMultipleAllocations")]),
        some(&[&["n1/nic-0"]])
    );
    assert_eq!(
        case.devices(&[pick("!device.allowMultipleAllocations")]),
        some(&[&["gpus/gpu-0"]])
    );
}

// ---- binding conditions ------------------------------------------------------------------

/// A fabric-attached GPU reachable from every node: it binds to the chosen node once the
/// driver reports `attached`, and fails on `failed`.
fn attachable() -> Vec<ResourceSlice> {
    vec![slice(
        "fabric",
        "fabric",
        1,
        json!({"allNodes": true, "devices": [{
            "name": "gpu-x",
            "bindsToNode": true,
            "bindingConditions": ["attached"],
            "bindingFailureConditions": ["failed"],
        }]}),
    )]
}

fn conditions_off() -> Features {
    Features {
        binding_conditions: false,
        ..Features::default()
    }
}

#[test]
fn devices_with_binding_conditions_are_offered() {
    let c = claim("c", one_request(1, None));
    let got = Case::new(attachable())
        .allocate(std::slice::from_ref(&c))
        .expect("no error")
        .expect("fits");
    let r = &results(&got[0])[0];
    assert_eq!(
        r.binding_conditions.as_deref(),
        Some(&["attached".to_string()][..])
    );
    assert_eq!(
        r.binding_failure_conditions.as_deref(),
        Some(&["failed".to_string()][..])
    );
    assert_eq!(
        serde_json::to_value(&got[0].node_selector).expect("json"),
        json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}),
        "bindsToNode pins a device of an allNodes slice to the chosen node"
    );
    assert_eq!(
        Case::new(attachable())
            .features(conditions_off())
            .devices(std::slice::from_ref(&c)),
        None,
        "gate off: such devices are not offered (v1.34's behaviour)"
    );
}

/// The claim `c` as a driver left it after allocation, with its device's conditions.
fn allocated_with(conditions: Value, stamp: &str, version: &str) -> ResourceClaim {
    let mut c = claim("c", one_request(1, None));
    c.metadata.resource_version = Some(version.into());
    c.status = Some(de(json!({
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "fabric",
                "device": "gpu-x", "bindingConditions": ["attached"],
                "bindingFailureConditions": ["failed"]}]},
            "allocationTimestamp": stamp,
        },
        "devices": [{"driver": DRIVER, "pool": "fabric", "device": "gpu-x",
                     "conditions": conditions}],
    })));
    c
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

/// The plugin with the given args on a handle with the given clock.
fn plugin_with(
    objects: Arc<ObjectStore>,
    args: &DynamicResourcesArgs,
    clock: Option<Arc<dyn kubesched_framework::clock::Clock>>,
) -> DynamicResources {
    let mut builder = Handle::builder().objects(objects);
    if let Some(clock) = clock {
        builder = builder.clock(clock);
    }
    DynamicResources::new(args, &builder.build()).expect("plugin")
}

/// PreFilter, Filter and Reserve on n1 for a pod with claim `c`.
fn reserved(plugin: &DynamicResources) -> (CycleState, Arc<PodInfo>) {
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let pod = pod_with_claim("c").info();
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    let s = plugin.filter(&state, &pod, &nodes[0]);
    assert!(s.is_success(), "{s:?}");
    assert!(plugin.reserve(&mut state, &pod, "n1").is_success());
    (state, pod)
}

/// How often `scheduler_dra_bindingconditions_allocations_total` counted the pod's
/// profile, the test driver and `status`, and the wait histogram's count for the same.
fn binding_counts(plugin: &DynamicResources, pod: &PodInfo, status: &str) -> (u64, u64) {
    let labels = [pod.scheduler_name.as_str(), DRIVER, status];
    (
        plugin.metrics.binding_allocations.count(&labels),
        plugin.metrics.binding_wait.count(&labels),
    )
}

fn binding_store() -> Arc<ObjectStore> {
    let f = Fixture::new(attachable());
    f.objects
        .resource_claims
        .upsert(claim("c", one_request(1, None)));
    f.objects
}

#[tokio::test(start_paused = true)]
async fn pre_bind_waits_for_binding_conditions() {
    let objects = binding_store();
    let plugin = plugin_with(objects.clone(), &DynamicResourcesArgs::default(), None);
    let (state, pod) = reserved(&plugin);
    let driver = async {
        tokio::task::yield_now().await;
        // The driver attaches the device: the claim as the API now has it.
        objects.resource_claims.upsert(allocated_with(
            json!([condition("attached", "True", "Attached", "ok")]),
            "2026-01-01T00:00:00Z",
            "7",
        ));
    };
    let (status, ()) = tokio::join!(plugin.pre_bind(&state, &pod, "n1"), driver);
    assert!(status.is_success(), "{status:?}");
    assert_eq!(binding_counts(&plugin, &pod, "success"), (1, 1));
    assert_eq!(binding_counts(&plugin, &pod, "timeout"), (0, 0));
    let DraState(inner) = state.read::<DraState>().expect("state");
    assert_eq!(
        inner.claims.lock()[0].metadata.resource_version.as_deref(),
        Some("7"),
        "PreBind ends on the driver's copy"
    );
}

#[tokio::test(start_paused = true)]
async fn pre_bind_stamps_the_allocation_and_fails_on_a_failure_condition() {
    let objects = binding_store();
    let plugin = plugin_with(objects.clone(), &DynamicResourcesArgs::default(), None);
    let (state, pod) = reserved(&plugin);
    let driver = async {
        tokio::task::yield_now().await;
        objects.resource_claims.upsert(allocated_with(
            json!([condition("failed", "True", "Unplugged", "cable \"b\" gone")]),
            "2026-01-01T00:00:00Z",
            "7",
        ));
    };
    let (status, ()) = tokio::join!(plugin.pre_bind(&state, &pod, "n1"), driver);
    assert_eq!(status.code(), kubesched_framework::Code::Error);
    assert_eq!(
        status.reasons(),
        ["claim c binding failed: reason=Unplugged, message=\"cable \\\"b\\\" gone\""]
    );
    assert_eq!(binding_counts(&plugin, &pod, "failure"), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn pre_bind_times_out_after_the_binding_timeout() {
    let objects = binding_store();
    let args = DynamicResourcesArgs {
        binding_timeout: Some(ArgDuration::of(std::time::Duration::from_secs(30))),
        ..DynamicResourcesArgs::default()
    };
    let plugin = plugin_with(objects.clone(), &args, None);
    let (state, pod) = reserved(&plugin);
    let started = tokio::time::Instant::now();
    let status = plugin.pre_bind(&state, &pod, "n1").await;
    assert_eq!(status.reasons(), ["device binding timeout"]);
    assert_eq!(started.elapsed(), std::time::Duration::from_secs(30));
    assert_eq!(binding_counts(&plugin, &pod, "timeout"), (1, 1));
    let DraState(inner) = state.read::<DraState>().expect("state");
    let written = inner.claims.lock()[0].clone();
    assert!(
        allocation_of(&written).is_some_and(|a| a.allocation_timestamp.is_some()),
        "bindClaim stamps the allocation"
    );
}

#[tokio::test]
async fn a_claim_stuck_binding_is_deallocated() {
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let framework = PluginHarness::new(plugin_on(Arc::new(ObjectStore::default()))).framework();
    let rows = [
        (
            "timed out: allocated long ago, not attached",
            allocated_with(json!([]), "2000-01-01T00:00:00Z", "3"),
        ),
        (
            "failed",
            allocated_with(
                json!([condition("failed", "True", "Unplugged", "gone")]),
                "2099-01-01T00:00:00Z",
                "3",
            ),
        ),
    ];
    for (name, c) in rows {
        let objects = binding_store();
        objects.resource_claims.upsert(c);
        let plugin = plugin_on(objects);
        let pod = pod_with_claim("c").info();
        let mut state = CycleState::new();
        assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
        assert_eq!(
            plugin.filter(&state, &pod, &nodes[0]).reasons(),
            [ERR_REASON_NOT_AVAILABLE],
            "{name}"
        );
        let (_, s) = plugin
            .post_filter(&framework, &state, &pod, &NodeToStatus::default())
            .await;
        assert_eq!(s.reasons(), [MSG_DEALLOCATED], "{name}");
    }
    // Allocated recently and waiting: the pod may go on to PreBind's wait.
    let objects = binding_store();
    objects
        .resource_claims
        .upsert(allocated_with(json!([]), "2099-01-01T00:00:00Z", "3"));
    let plugin = plugin_on(objects);
    let pod = pod_with_claim("c").info();
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    assert!(plugin.filter(&state, &pod, &nodes[0]).is_success());
}

#[tokio::test]
async fn simulated_pre_bind_answers_at_once() {
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let clock: Arc<dyn kubesched_framework::clock::Clock> =
        Arc::new(kubesched_framework::clock::FakeClock::new());
    // The manifest's claim status already says the device is attached.
    let objects = binding_store();
    let mut c = claim("c", one_request(1, None));
    c.status = Some(de(
        json!({"devices": [{"driver": DRIVER, "pool": "fabric", "device": "gpu-x",
        "conditions": [condition("attached", "True", "Attached", "ok")]}]}),
    ));
    objects.resource_claims.upsert(c);
    let plugin = plugin_with(
        objects,
        &DynamicResourcesArgs::default(),
        Some(clock.clone()),
    );
    let (state, pod) = reserved(&plugin);
    assert!(plugin.pre_bind(&state, &pod, "n1").await.is_success());

    // Nothing will attach it: the timeout, without waiting, and the next attempt finds
    // the claim timed out.
    let objects = binding_store();
    let plugin = plugin_with(
        objects.clone(),
        &DynamicResourcesArgs::default(),
        Some(clock),
    );
    let (state, pod) = reserved(&plugin);
    assert_eq!(
        plugin.pre_bind(&state, &pod, "n1").await.reasons(),
        ["device binding timeout"]
    );
    let DraState(inner) = state.read::<DraState>().expect("state");
    let mut written = (*inner.claims.lock()[0]).clone();
    written.metadata.resource_version = Some("9".into());
    objects.resource_claims.upsert(written);
    let mut again = CycleState::new();
    assert!(plugin.pre_filter(&mut again, &pod, &nodes).1.is_success());
    assert_eq!(
        plugin.filter(&again, &pod, &nodes[0]).reasons(),
        [ERR_REASON_NOT_AVAILABLE]
    );
}

#[tokio::test]
async fn emulated_v1_35_does_not_offer_devices_with_binding_conditions() {
    let objects = binding_store();
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let pod = pod_with_claim("c").info();
    let old = PluginHarness::new(plugin_at(
        objects.clone(),
        kubesched_framework::Version::V1_35,
    ))
    .run(&pod, &nodes);
    assert_eq!(
        old.filter_of("n1").map(|s| s.reasons.clone()),
        Some(vec![ERR_REASON_CANNOT_ALLOCATE.to_string()])
    );
    let now = PluginHarness::new(plugin_on(objects)).run(&pod, &nodes);
    assert_eq!(now.feasible(), vec!["n1"]);
}

#[test]
fn results_carry_the_requests_tolerations() {
    let toleration = json!({"key": "example.com/unhealthy", "operator": "Exists"});
    let c = claim("c", tolerating(1, toleration.clone()));
    let got = tainted_pair("NoSchedule")
        .allocate(std::slice::from_ref(&c), &[], "n1")
        .expect("no error")
        .expect("fits");
    let r = results(&got[0]);
    assert_eq!(
        serde_json::to_value(&r[0].tolerations).expect("json"),
        json!([toleration])
    );
    let plain = eight_gpus()
        .allocate(&[claim("c", one_request(1, None))], &[], "n1")
        .expect("no error")
        .expect("fits");
    assert_eq!(results(&plain[0])[0].tolerations, None);
}

#[test]
fn pre_filter_names_requests_it_cannot_read() {
    let nodes = vec![node_info(NodeBuilder::new("n1"), &[])];
    let run = |devices: Value, version: Option<kubesched_framework::Version>| {
        let objects = store_with(&["n1"], vec![claim("c", devices)]);
        let plugin = match version {
            Some(v) => plugin_at(objects, v),
            None => plugin_on(objects),
        };
        let mut state = CycleState::new();
        let (_, s) = plugin.pre_filter(&mut state, &pod_with_claim("c").info(), &nodes);
        (s.code(), s.reasons().to_vec())
    };
    let unresolvable = kubesched_framework::Code::UnschedulableAndUnresolvable;
    assert_eq!(
        run(json!({"requests": [{"name": "r"}]}), None),
        (
            unresolvable,
            vec!["resource claim default/c, request r: unknown request type".to_string()]
        )
    );
    assert_eq!(
        run(
            json!({"requests": [{"name": "r", "exactly": {"deviceClassName": ""}}]}),
            None
        ),
        (
            kubesched_framework::Code::Error,
            vec!["request r: unsupported request type".to_string()]
        )
    );
    let listed = json!({"requests": [{"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu"}]}]});
    assert!(run(listed.clone(), None).1.is_empty());
    let gates = kubesched_framework::FeatureGates::parse_at(
        kubesched_framework::Version::V1_35,
        ["DRAPrioritizedList=false"],
    )
    .expect("gates");
    let objects = store_with(&["n1"], vec![claim("c", listed)]);
    let handle = Handle::builder().objects(objects).features(gates).build();
    let plugin = DynamicResources::new(&DynamicResourcesArgs::default(), &handle).expect("plugin");
    let mut state = CycleState::new();
    let (_, s) = plugin.pre_filter(&mut state, &pod_with_claim("c").info(), &nodes);
    assert_eq!(
        s.reasons(),
        [
            "resource claim default/c, request r: has subrequests, but the DRAPrioritizedList feature is disabled"
        ]
    );
}

/// The claim of a pod's DRA-backed extended resources waits for its devices' binding
/// conditions like the pod's own claims: with the fabric GPU's `attached` never reported,
/// PreBind times out instead of binding the pod to a device not ready yet.
#[tokio::test(start_paused = true)]
async fn an_extended_resource_claim_waits_for_its_binding_conditions() {
    let f = Fixture::new(attachable());
    f.objects.device_classes.upsert(de::<DeviceClass>(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"},
    })));
    let args = DynamicResourcesArgs {
        binding_timeout: Some(ArgDuration::of(std::time::Duration::from_secs(30))),
        ..DynamicResourcesArgs::default()
    };
    let plugin = plugin_with(f.objects.clone(), &args, None);
    let pod = PodBuilder::new("p")
        .uid("uid-p")
        .container(&[("cpu", "1"), ("example.com/gpu", "1")])
        .info();
    let nodes = vec![node_info(
        NodeBuilder::new("n1").capacity(&[("cpu", "8"), ("pods", "10")]),
        &[],
    )];
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    let s = plugin.filter(&state, &pod, &nodes[0]);
    assert!(s.is_success(), "{s:?}");
    assert!(plugin.reserve(&mut state, &pod, "n1").is_success());
    let status = plugin.pre_bind(&state, &pod, "n1").await;
    assert_eq!(status.reasons(), ["device binding timeout"]);
    // #138542's name for the claims the scheduler creates.
    assert_eq!(plugin.metrics.claim_creates.count(&["success", "false"]), 1);
    assert_eq!(binding_counts(&plugin, &pod, "timeout"), (1, 1));
    let DraState(inner) = state.read::<DraState>().expect("state");
    let ext = inner.extended.as_ref().expect("extended");
    let written = ext.claim.lock().clone();
    assert!(
        allocation_of(&written).is_some_and(|a| a.allocation_timestamp.is_some()),
        "the created claim's allocation is stamped"
    );
}
