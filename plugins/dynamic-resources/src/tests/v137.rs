//! Table tests of the allocator features v1.37 turns on by default: partitionable
//! devices' shared counters (DRAPartitionableDevices), consumable capacity
//! (DRAConsumableCapacity) and binding conditions (DRADeviceBindingConditions), each
//! with the gate off as well.

use super::*;

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
    features: Features,
    node: &'static str,
    labels: Vec<(&'static str, &'static str)>,
}

impl Case {
    fn new(slices: Vec<ResourceSlice>) -> Self {
        Self {
            slices,
            allocated: Vec::new(),
            features: Features::default(),
            node: "n1",
            labels: Vec::new(),
        }
    }

    fn allocated(mut self, devices: &[(&'static str, &'static str)]) -> Self {
        self.allocated = devices.to_vec();
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
        let index = Arc::new(SliceIndex::build(&f.objects.resource_slices));
        let class_of = |n: &str| f.objects.device_classes.get(None, n);
        let allocator = Allocator::new(
            self.features,
            &claims,
            Arc::new(allocated),
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
