//! Table tests per extension point, in the spirit of upstream's volume_binding_test.go and
//! binder_test.go (our own cases), snapshots of Filter, and the args round trip.

use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::events::EventObject;
use kubesched_framework::model::k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim,
};
use kubesched_framework::model::k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass,
};
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement,
};
use kubesched_framework::registry::{self, PluginArgs};
use kubesched_framework::{
    ClientError, ClusterClient, Event, FeatureGates, HandleControl, ObjectStore, PodStatusUpdate,
    Snapshot,
};
use kubesched_testing::{
    NodeBuilder, PluginHarness, PluginRun, PodBuilder, PvBuilder, PvcBuilder, StorageClassBuilder,
    csi_driver, csi_node, csi_storage_capacity, node_info, node_infos,
};

use super::*;
use kubesched_framework::events::QueueingHint;

// ---------------------------------------------------------------------------------------
// The world a test runs in.

/// A WaitForFirstConsumer class with a CSI provisioner.
const WAIT: &str = "wait";
/// A WaitForFirstConsumer class that cannot provision.
const WAIT_STATIC: &str = "wait-static";
/// An Immediate class.
const IMMEDIATE: &str = "immediate";
/// The CSI driver of `WAIT`.
const DRIVER: &str = "csi.example.com";

#[derive(Default, Clone)]
struct World {
    pvs: Vec<PersistentVolume>,
    pvcs: Vec<PersistentVolumeClaim>,
    classes: Vec<StorageClass>,
    drivers: Vec<CSIDriver>,
    capacities: Vec<CSIStorageCapacity>,
    csi_nodes: Vec<CSINode>,
}

impl World {
    /// The three usual classes.
    fn new() -> Self {
        Self::default()
            .class(StorageClassBuilder::new(WAIT, DRIVER).wait_for_first_consumer())
            .class(
                StorageClassBuilder::new(WAIT_STATIC, NOT_SUPPORTED_PROVISIONER)
                    .wait_for_first_consumer(),
            )
            .class(StorageClassBuilder::new(IMMEDIATE, DRIVER))
    }
    fn pv(mut self, b: PvBuilder) -> Self {
        self.pvs.push(b.build());
        self
    }
    fn pvc(mut self, b: PvcBuilder) -> Self {
        self.pvcs.push(b.build());
        self
    }
    fn class(mut self, b: StorageClassBuilder) -> Self {
        self.classes.push(b.build());
        self
    }
    fn driver(mut self, d: CSIDriver) -> Self {
        self.drivers.push(d);
        self
    }
    fn capacity(mut self, c: CSIStorageCapacity) -> Self {
        self.capacities.push(c);
        self
    }
    fn objects(&self) -> Arc<ObjectStore> {
        let o = ObjectStore::default();
        self.pvs
            .iter()
            .for_each(|x| o.persistent_volumes.upsert(x.clone()));
        self.pvcs
            .iter()
            .for_each(|x| o.persistent_volume_claims.upsert(x.clone()));
        self.classes
            .iter()
            .for_each(|x| o.storage_classes.upsert(x.clone()));
        self.drivers
            .iter()
            .for_each(|x| o.csi_drivers.upsert(x.clone()));
        self.capacities
            .iter()
            .for_each(|x| o.csi_storage_capacities.upsert(x.clone()));
        self.csi_nodes
            .iter()
            .for_each(|x| o.csi_nodes.upsert(x.clone()));
        Arc::new(o)
    }
    /// The plugin over this world's objects, with `client` and `args`.
    fn plugin_with(
        &self,
        client: Arc<dyn ClusterClient>,
        args: VolumeBindingArgs,
    ) -> (VolumeBinding, HandleControl) {
        let handle = Handle::builder()
            .objects(self.objects())
            .client(client)
            .build_with_control();
        let pl = VolumeBinding::new(&args, &handle).expect("valid args");
        (pl, handle)
    }
    fn plugin(&self) -> VolumeBinding {
        self.plugin_with(
            Arc::new(kubesched_framework::NoopClient),
            VolumeBindingArgs::default(),
        )
        .0
    }
}

/// Three nodes: n1 and n2 in zone a, n3 in zone b.
fn nodes() -> Vec<NodeBuilder> {
    vec![
        NodeBuilder::new("n1").zone("a"),
        NodeBuilder::new("n2").zone("a"),
        NodeBuilder::new("n3").zone("b"),
    ]
}

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

/// A volume the PV controller made Available.
fn avail(name: &str) -> PvBuilder {
    PvBuilder::new(name).available()
}

fn pod(claims: &[&str]) -> PodBuilder {
    claims.iter().fold(PodBuilder::new("p"), |p, c| p.pvc(c))
}

fn run(world: &World, pod: PodBuilder) -> PluginRun {
    PluginHarness::new(world.plugin()).run(&pod.info(), &node_infos(nodes(), &[]))
}

/// Checks one row: PreFilter's status, then, when it passed, each node's Filter status as
/// `(node, reasons)` (empty reasons: Success).
fn check(name: &str, world: World, pod: PodBuilder, pre_filter: &str, want: &[(&str, &[&str])]) {
    let r = run(&world, pod);
    let pf = r.pre_filter.as_ref().expect("PreFilter ran");
    assert_eq!(pf.code, pre_filter, "{name}: PreFilter {pf:?}");
    for (node, reasons) in want {
        let got = r
            .filter_of(node)
            .unwrap_or_else(|| panic!("{name}: no Filter on {node}"));
        if reasons.is_empty() {
            assert_eq!(got.code, "Success", "{name} on {node}: {got:?}");
        } else {
            assert_eq!(got.code, "UnschedulableAndUnresolvable", "{name} on {node}");
            assert_eq!(got.reasons, *reasons, "{name} on {node}");
        }
    }
}

/// PreFilter alone: its code and reasons.
fn check_pre_filter(name: &str, world: World, pod: PodBuilder, code: &str, reasons: &[&str]) {
    let r = run(&world, pod);
    let pf = r.pre_filter.as_ref().expect("PreFilter ran");
    assert_eq!(pf.code, code, "{name}: {pf:?}");
    assert_eq!(pf.reasons, reasons, "{name}");
}

// ---------------------------------------------------------------------------------------
// PreFilter

#[test]
fn pre_filter_table() {
    let w = World::new;
    check_pre_filter("no volumes", w(), PodBuilder::new("p"), "Skip", &[]);
    check_pre_filter(
        "volumes without claims",
        w(),
        PodBuilder::new("p").with(|p| {
            p.spec.get_or_insert_with(Default::default).volumes = Some(vec![Default::default()]);
        }),
        "Skip",
        &[],
    );
    check_pre_filter(
        "missing claim",
        w(),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[r#"persistentvolumeclaim "data" not found"#],
    );
    check_pre_filter(
        "claim in another namespace",
        w().pvc(
            PvcBuilder::new("data")
                .namespace("other")
                .storage_class(WAIT),
        ),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[r#"persistentvolumeclaim "data" not found"#],
    );
    check_pre_filter(
        "ephemeral claim not created yet",
        w(),
        PodBuilder::new("p").ephemeral_volume("scratch"),
        "UnschedulableAndUnresolvable",
        &[
            r#"waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch""#,
        ],
    );
    check_pre_filter(
        "ephemeral claim of another pod",
        w().pvc(
            PvcBuilder::new("p-scratch")
                .storage_class(WAIT)
                .owned_by_pod("p", "other-uid"),
        ),
        PodBuilder::new("p").ephemeral_volume("scratch"),
        "UnschedulableAndUnresolvable",
        &["PVC default/p-scratch was not created for pod default/p (pod is not owner)"],
    );
    check_pre_filter(
        "ephemeral claim of the pod",
        w().pvc(
            PvcBuilder::new("p-scratch")
                .storage_class(WAIT)
                .owned_by_pod("p", "p"),
        ),
        PodBuilder::new("p").ephemeral_volume("scratch"),
        "Success",
        &[],
    );
    check_pre_filter(
        "lost claim",
        w().pvc(
            PvcBuilder::new("data")
                .storage_class(WAIT)
                .volume_name("gone")
                .phase("Lost"),
        ),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[r#"persistentvolumeclaim "data" bound to non-existent persistentvolume "gone""#],
    );
    check_pre_filter(
        "claim being deleted",
        w().pvc(PvcBuilder::new("data").storage_class(WAIT).deleting()),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[r#"persistentvolumeclaim "data" is being deleted"#],
    );
    check_pre_filter(
        "unbound immediate claim",
        w().pvc(PvcBuilder::new("data").storage_class(IMMEDIATE)),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[ERR_REASON_UNBOUND_IMMEDIATE],
    );
    check_pre_filter(
        "unbound claim without a class binds immediately",
        w().pvc(PvcBuilder::new("data")),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[ERR_REASON_UNBOUND_IMMEDIATE],
    );
    check_pre_filter(
        "unbound claim of a missing class binds immediately",
        w().pvc(PvcBuilder::new("data").storage_class("nowhere")),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[ERR_REASON_UNBOUND_IMMEDIATE],
    );
    check_pre_filter(
        "claim pre-bound by name waits for the PV controller",
        w().pvc(
            PvcBuilder::new("data")
                .storage_class(WAIT)
                .volume_name("pv1"),
        )
        .pv(avail("pv1").storage_class(WAIT).capacity("1Gi")),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[ERR_REASON_UNBOUND_IMMEDIATE],
    );
    check_pre_filter(
        "bound without bind-completed is not bound",
        w().pvc(
            PvcBuilder::new("data")
                .storage_class(IMMEDIATE)
                .volume_name("pv1")
                .phase("Bound"),
        )
        .pv(avail("pv1")
            .storage_class(IMMEDIATE)
            .bound_to("default", "data", "uid-data")),
        pod(&["data"]),
        "UnschedulableAndUnresolvable",
        &[ERR_REASON_UNBOUND_IMMEDIATE],
    );
    check_pre_filter(
        "a class without a binding mode is an error",
        w().class(StorageClassBuilder::new("unset", DRIVER).with(|c| c.volume_binding_mode = None))
            .pvc(PvcBuilder::new("data").storage_class("unset")),
        pod(&["data"]),
        "Error",
        &[r#"VolumeBindingMode not set for StorageClass "unset""#],
    );
    check_pre_filter(
        "bound claim",
        w().pvc(
            PvcBuilder::new("data")
                .storage_class(IMMEDIATE)
                .bound_to("pv1"),
        )
        .pv(avail("pv1")
            .storage_class(IMMEDIATE)
            .bound_to("default", "data", "uid-data")),
        pod(&["data"]),
        "Success",
        &[],
    );
    check_pre_filter(
        "unbound delayed claim",
        w().pvc(PvcBuilder::new("data").storage_class(WAIT)),
        pod(&["data"]),
        "Success",
        &[],
    );
    // The first failing claim decides.
    check_pre_filter(
        "first missing claim reported",
        w().pvc(PvcBuilder::new("b").storage_class(WAIT).deleting()),
        pod(&["a", "b"]),
        "UnschedulableAndUnresolvable",
        &[r#"persistentvolumeclaim "a" not found"#],
    );
}

#[test]
fn pre_filter_narrows_to_hostnames_of_bound_local_volumes() {
    let bound = |claim: &str, pv: &str| {
        PvcBuilder::new(claim)
            .storage_class(WAIT_STATIC)
            .bound_to(pv)
    };
    let local = |pv: &str, claim: &str, hosts: &[&str]| {
        avail(pv)
            .storage_class(WAIT_STATIC)
            .bound_to("default", claim, &format!("uid-{claim}"))
            .affinity(HOSTNAME, hosts)
    };
    let narrowing = |world: World, pod: PodBuilder| run(&world, pod).pre_filter_nodes;
    let w = World::new()
        .pvc(bound("a", "pv-a"))
        .pv(local("pv-a", "a", &["n1", "n2"]));
    assert_eq!(
        narrowing(w.clone(), pod(&["a"])),
        Some(vec!["n1".to_string(), "n2".to_string()])
    );
    // Two local volumes: the intersection.
    let w2 = w
        .clone()
        .pvc(bound("b", "pv-b"))
        .pv(local("pv-b", "b", &["n2", "n3"]));
    assert_eq!(
        narrowing(w2, pod(&["a", "b"])),
        Some(vec!["n2".to_string()])
    );
    // Disjoint: an empty set, which rejects the pod.
    let w3 = w
        .clone()
        .pvc(bound("b", "pv-b"))
        .pv(local("pv-b", "b", &["n3"]));
    assert_eq!(narrowing(w3, pod(&["a", "b"])), Some(vec![]));
    // A zonal volume pins no hostname; a missing volume cancels the narrowing.
    let w4 = World::new().pvc(bound("z", "pv-z")).pv(avail("pv-z")
        .storage_class(WAIT_STATIC)
        .bound_to("default", "z", "uid-z")
        .affinity(ZONE, &["a"]));
    assert_eq!(narrowing(w4, pod(&["z"])), None);
    let w5 = w.pvc(bound("gone", "pv-gone"));
    assert_eq!(narrowing(w5, pod(&["a", "gone"])), None);
    // Only `In` on the hostname label counts, as upstream.
    let w6 = World::new().pvc(bound("a", "pv-a")).pv(avail("pv-a")
        .storage_class(WAIT_STATIC)
        .bound_to("default", "a", "uid-a")
        .node_term(kubesched_testing::node_term(HOSTNAME, "NotIn", &["n1"])));
    assert_eq!(narrowing(w6, pod(&["a"])), None);
}

// ---------------------------------------------------------------------------------------
// Filter

#[test]
fn filter_bound_claims() {
    let bound = PvcBuilder::new("data")
        .storage_class(WAIT_STATIC)
        .bound_to("pv1");
    let pv = || {
        avail("pv1")
            .storage_class(WAIT_STATIC)
            .capacity("1Gi")
            .bound_to("default", "data", "uid-data")
    };
    check(
        "no node affinity",
        World::new().pvc(bound.clone()).pv(pv()),
        pod(&["data"]),
        "Success",
        &[("n1", &[]), ("n2", &[]), ("n3", &[])],
    );
    check(
        "zonal volume",
        World::new()
            .pvc(bound.clone())
            .pv(pv().affinity(ZONE, &["a"])),
        pod(&["data"]),
        "Success",
        &[
            ("n1", &[]),
            ("n2", &[]),
            ("n3", &[ERR_REASON_NODE_CONFLICT]),
        ],
    );
    check(
        "volume missing",
        World::new().pvc(bound.clone()),
        pod(&["data"]),
        "Success",
        &[
            ("n1", &[ERR_REASON_PV_NOT_EXIST]),
            ("n3", &[ERR_REASON_PV_NOT_EXIST]),
        ],
    );
    // As upstream's CheckNodeAffinity, which matches against the node's labels alone.
    check(
        "metadata.name field affinity matches no node",
        World::new().pvc(bound.clone()).pv(pv().node_term(
            kubesched_framework::model::k8s_openapi::api::core::v1::NodeSelectorTerm {
                match_fields: Some(vec![
                    kubesched_framework::model::k8s_openapi::api::core::v1::NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec!["n1".into()]),
                    },
                ]),
                ..Default::default()
            },
        )),
        pod(&["data"]),
        "Success",
        &[("n1", &[ERR_REASON_NODE_CONFLICT])],
    );
    // A term that does not compile matches nothing; the other terms still count.
    check(
        "broken term beside a good one",
        World::new().pvc(bound.clone()).pv(pv()
            .node_term(kubesched_testing::node_term(ZONE, "Gt", &["x"]))
            .affinity(HOSTNAME, &["n2"])),
        pod(&["data"]),
        "Success",
        &[("n1", &[ERR_REASON_NODE_CONFLICT]), ("n2", &[])],
    );
    // The first claim whose volume is missing stops the checks.
    check(
        "missing volume before a mismatching one",
        World::new()
            .pvc(
                PvcBuilder::new("a")
                    .storage_class(WAIT_STATIC)
                    .bound_to("gone"),
            )
            .pvc(bound)
            .pv(pv().affinity(ZONE, &["b"])),
        pod(&["a", "data"]),
        "Success",
        &[("n1", &[ERR_REASON_PV_NOT_EXIST])],
    );
}

#[test]
fn filter_static_binding() {
    let claim = || {
        PvcBuilder::new("data")
            .storage_class(WAIT_STATIC)
            .request("5Gi")
    };
    let pv = |name: &str, size: &str| avail(name).storage_class(WAIT_STATIC).capacity(size);
    let all_fail: &[(&str, &[&str])] = &[
        ("n1", &[ERR_REASON_BIND_CONFLICT]),
        ("n2", &[ERR_REASON_BIND_CONFLICT]),
        ("n3", &[ERR_REASON_BIND_CONFLICT]),
    ];
    let all_pass: &[(&str, &[&str])] = &[("n1", &[]), ("n2", &[]), ("n3", &[])];
    check(
        "no volume",
        World::new().pvc(claim()),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    check(
        "a fitting volume",
        World::new().pvc(claim()).pv(pv("pv1", "5Gi")),
        pod(&["data"]),
        "Success",
        all_pass,
    );
    check(
        "too small",
        World::new().pvc(claim()).pv(pv("pv1", "4Gi")),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    check(
        "local volume",
        World::new()
            .pvc(claim())
            .pv(pv("pv1", "10Gi").affinity(HOSTNAME, &["n2"])),
        pod(&["data"]),
        "Success",
        &[
            ("n1", &[ERR_REASON_BIND_CONFLICT]),
            ("n2", &[]),
            ("n3", &[ERR_REASON_BIND_CONFLICT]),
        ],
    );
    check(
        "volume of another class",
        World::new()
            .pvc(claim())
            .pv(avail("pv1").storage_class(WAIT).capacity("5Gi")),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    check(
        "volume claimed by another claim",
        World::new()
            .pvc(claim())
            .pv(pv("pv1", "5Gi").claim_ref_uid("default", "other", None)),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    check(
        "volume not Available",
        World::new()
            .pvc(claim())
            .pv(pv("pv1", "5Gi").phase("Released")),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    check(
        "volume being deleted",
        World::new().pvc(claim()).pv(pv("pv1", "5Gi").deleting()),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    check(
        "access modes",
        World::new()
            .pvc(claim().access_modes(&["ReadWriteMany"]))
            .pv(pv("pv1", "5Gi").access_modes(&["ReadWriteOnce", "ReadOnlyMany"])),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    check(
        "access modes subset",
        World::new()
            .pvc(claim().access_modes(&["ReadOnlyMany"]))
            .pv(pv("pv1", "5Gi").access_modes(&["ReadWriteOnce", "ReadOnlyMany"])),
        pod(&["data"]),
        "Success",
        all_pass,
    );
    check(
        "block claim, filesystem volume",
        World::new()
            .pvc(claim().volume_mode("Block"))
            .pv(pv("pv1", "5Gi")),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    check(
        "block claim, block volume",
        World::new()
            .pvc(claim().volume_mode("Block"))
            .pv(pv("pv1", "5Gi").volume_mode("Block")),
        pod(&["data"]),
        "Success",
        all_pass,
    );
    check(
        "selector",
        World::new()
            .pvc(claim().selector(&[("tier", "gold")]))
            .pv(pv("pv1", "5Gi").label("tier", "silver"))
            .pv(pv("pv2", "5Gi")
                .label("tier", "gold")
                .affinity(ZONE, &["b"])),
        pod(&["data"]),
        "Success",
        &[("n1", &[ERR_REASON_BIND_CONFLICT]), ("n3", &[])],
    );
    check(
        "volume attributes class must be equal",
        World::new().pvc(claim()).pv(pv("pv1", "5Gi").with(|p| {
            p.spec
                .get_or_insert_with(Default::default)
                .volume_attributes_class_name = Some("fast".into());
        })),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    // A volume bound to the claim by its claimRef decides alone, even when smaller ones
    // would do, and even when the node does not suit it.
    check(
        "pre-bound volume on another node",
        World::new()
            .pvc(claim())
            .pv(pv("pv-small", "5Gi"))
            .pv(pv("pv-mine", "50Gi")
                .claim_ref_uid("default", "data", Some("uid-data"))
                .affinity(HOSTNAME, &["n3"])),
        pod(&["data"]),
        "Success",
        &[("n1", &[ERR_REASON_BIND_CONFLICT]), ("n3", &[])],
    );
    check(
        "claimRef with another UID is another claim",
        World::new().pvc(claim()).pv(pv("pv1", "5Gi")
            .claim_ref_uid("default", "data", Some("old-uid"))
            .phase("Released")),
        pod(&["data"]),
        "Success",
        all_fail,
    );
    let r = run(
        &World::new().pvc(claim().raw_selector(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..Default::default()
        })),
        pod(&["data"]),
    );
    let f = r.filter_of("n1").expect("filter");
    assert_eq!(f.code, "Error");
    assert!(
        f.reasons[0]
            .starts_with("error creating internal label selector for claim: default/data: "),
        "{f:?}"
    );
}

#[test]
fn filter_two_claims_share_no_volume() {
    let claim = |n: &str, size: &str| PvcBuilder::new(n).storage_class(WAIT_STATIC).request(size);
    let pv = |name: &str, size: &str| avail(name).storage_class(WAIT_STATIC).capacity(size);
    // One volume for two claims: no node fits.
    check(
        "one volume",
        World::new()
            .pvc(claim("a", "1Gi"))
            .pvc(claim("b", "1Gi"))
            .pv(pv("pv1", "1Gi")),
        pod(&["a", "b"]),
        "Success",
        &[("n1", &[ERR_REASON_BIND_CONFLICT])],
    );
    // The smaller claim picks first, so the large volume is left for the large claim.
    check(
        "smallest claim first",
        World::new()
            .pvc(claim("big", "10Gi"))
            .pvc(claim("small", "1Gi"))
            .pv(pv("pv-10", "10Gi"))
            .pv(pv("pv-20", "20Gi").affinity(ZONE, &["b"])),
        pod(&["big", "small"]),
        "Success",
        &[("n1", &[ERR_REASON_BIND_CONFLICT]), ("n3", &[])],
    );
}

#[test]
fn filter_provisioning() {
    let claim = || PvcBuilder::new("data").storage_class(WAIT).request("5Gi");
    let all_pass: &[(&str, &[&str])] = &[("n1", &[]), ("n2", &[]), ("n3", &[])];
    check(
        "provisionable anywhere",
        World::new().pvc(claim()),
        pod(&["data"]),
        "Success",
        all_pass,
    );
    check(
        "a static volume is not needed",
        World::new()
            .pvc(claim())
            .pv(avail("pv1").storage_class(WAIT).capacity("1Gi")),
        pod(&["data"]),
        "Success",
        all_pass,
    );
    check(
        "allowed topologies",
        World::new()
            .class(
                StorageClassBuilder::new("zonal", DRIVER)
                    .wait_for_first_consumer()
                    .allowed_topology(ZONE, &["b"]),
            )
            .pvc(PvcBuilder::new("data").storage_class("zonal")),
        pod(&["data"]),
        "Success",
        &[("n1", &[ERR_REASON_BIND_CONFLICT]), ("n3", &[])],
    );
    check(
        "allowed topology term without values matches nothing",
        World::new()
            .class(
                StorageClassBuilder::new("zonal", DRIVER)
                    .wait_for_first_consumer()
                    .allowed_topology(ZONE, &[]),
            )
            .pvc(PvcBuilder::new("data").storage_class("zonal")),
        pod(&["data"]),
        "Success",
        &[
            ("n1", &[ERR_REASON_BIND_CONFLICT]),
            ("n3", &[ERR_REASON_BIND_CONFLICT]),
        ],
    );
    check(
        "selected node",
        World::new().pvc(claim().selected_node("n2")),
        pod(&["data"]),
        "Success",
        &[
            ("n1", &[ERR_REASON_BIND_CONFLICT]),
            ("n2", &[]),
            ("n3", &[ERR_REASON_BIND_CONFLICT]),
        ],
    );
    check(
        "selected node of a class that cannot provision",
        World::new().pvc(
            PvcBuilder::new("data")
                .storage_class(WAIT_STATIC)
                .selected_node("n2"),
        ),
        pod(&["data"]),
        "Success",
        &[
            ("n1", &[ERR_REASON_BIND_CONFLICT]),
            ("n2", &[ERR_REASON_BIND_CONFLICT]),
        ],
    );
    // Capacity is only checked when the driver asks for it.
    let tracked = |capacity: CSIStorageCapacity| {
        World::new()
            .pvc(claim())
            .driver(csi_driver(DRIVER, true))
            .capacity(capacity)
    };
    check(
        "driver without capacity tracking",
        World::new()
            .pvc(claim())
            .driver(csi_driver(DRIVER, false))
            .capacity(csi_storage_capacity(
                "c",
                WAIT,
                Some("1Gi"),
                None,
                Some(&[(ZONE, "a")]),
            )),
        pod(&["data"]),
        "Success",
        all_pass,
    );
    check(
        "enough in zone a",
        tracked(csi_storage_capacity(
            "c",
            WAIT,
            Some("10Gi"),
            None,
            Some(&[(ZONE, "a")]),
        )),
        pod(&["data"]),
        "Success",
        &[
            ("n1", &[]),
            ("n2", &[]),
            ("n3", &[ERR_REASON_NOT_ENOUGH_SPACE]),
        ],
    );
    check(
        "not enough anywhere",
        tracked(csi_storage_capacity(
            "c",
            WAIT,
            Some("4Gi"),
            None,
            Some(&[(ZONE, "a")]),
        )),
        pod(&["data"]),
        "Success",
        &[
            ("n1", &[ERR_REASON_NOT_ENOUGH_SPACE]),
            ("n3", &[ERR_REASON_NOT_ENOUGH_SPACE]),
        ],
    );
    check(
        "maximumVolumeSize wins over capacity",
        tracked(csi_storage_capacity(
            "c",
            WAIT,
            Some("100Gi"),
            Some("4Gi"),
            Some(&[(ZONE, "a")]),
        )),
        pod(&["data"]),
        "Success",
        &[("n1", &[ERR_REASON_NOT_ENOUGH_SPACE])],
    );
    check(
        "pool of another class",
        tracked(csi_storage_capacity(
            "c",
            WAIT_STATIC,
            Some("100Gi"),
            None,
            Some(&[(ZONE, "a")]),
        )),
        pod(&["data"]),
        "Success",
        &[("n1", &[ERR_REASON_NOT_ENOUGH_SPACE])],
    );
    check(
        "pool without topology is reachable from nowhere",
        tracked(csi_storage_capacity("c", WAIT, Some("100Gi"), None, None)),
        pod(&["data"]),
        "Success",
        &[("n1", &[ERR_REASON_NOT_ENOUGH_SPACE])],
    );
    check(
        "claim without a request is not checked",
        World::new()
            .pvc(PvcBuilder::new("data").storage_class(WAIT).no_request())
            .driver(csi_driver(DRIVER, true)),
        pod(&["data"]),
        "Success",
        all_pass,
    );
}

#[test]
fn filter_reports_every_kind_of_conflict() {
    // A bound volume in zone b and a claim that can only be provisioned in zone a.
    let w = World::new()
        .class(
            StorageClassBuilder::new("zonal", DRIVER)
                .wait_for_first_consumer()
                .allowed_topology(ZONE, &["a"]),
        )
        .pvc(
            PvcBuilder::new("bound")
                .storage_class(WAIT_STATIC)
                .bound_to("pv1"),
        )
        .pv(avail("pv1")
            .storage_class(WAIT_STATIC)
            .bound_to("default", "bound", "uid-bound")
            .affinity(ZONE, &["b"]))
        .pvc(PvcBuilder::new("new").storage_class("zonal"));
    check(
        "both",
        w,
        pod(&["bound", "new"]),
        "Success",
        &[
            ("n1", &[ERR_REASON_NODE_CONFLICT]),
            ("n3", &[ERR_REASON_BIND_CONFLICT]),
        ],
    );
    let w = World::new()
        .pvc(
            PvcBuilder::new("bound")
                .storage_class(WAIT_STATIC)
                .bound_to("pv1"),
        )
        .pv(avail("pv1")
            .storage_class(WAIT_STATIC)
            .bound_to("default", "bound", "uid-bound")
            .affinity(ZONE, &["b"]))
        .pvc(PvcBuilder::new("new").storage_class(WAIT_STATIC));
    check(
        "node and bind conflicts together",
        w,
        pod(&["bound", "new"]),
        "Success",
        &[("n1", &[ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT])],
    );
}

#[test]
fn snapshots() {
    // n1: "db" takes the local volume, "logs" and "cache" are provisioned. n2: "cache" finds
    // no pool large enough (checked before "db", which would have no volume either). n3:
    // "logs" cannot be provisioned in zone b.
    let world = World::new()
        .class(
            StorageClassBuilder::new("zonal", "zonal.example.com")
                .wait_for_first_consumer()
                .allowed_topology(ZONE, &["a"]),
        )
        .pvc(
            PvcBuilder::new("db")
                .storage_class(WAIT_STATIC)
                .request("10Gi"),
        )
        .pv(avail("local-n1")
            .storage_class(WAIT_STATIC)
            .capacity("20Gi")
            .affinity(HOSTNAME, &["n1"]))
        .pv(avail("local-n3")
            .storage_class(WAIT_STATIC)
            .capacity("10Gi")
            .affinity(HOSTNAME, &["n3"]))
        .pvc(
            PvcBuilder::new("logs")
                .storage_class("zonal")
                .request("1Gi"),
        )
        .pvc(PvcBuilder::new("cache").storage_class(WAIT).request("5Gi"))
        .driver(csi_driver(DRIVER, true))
        .capacity(csi_storage_capacity(
            "pool-n1",
            WAIT,
            Some("10Gi"),
            None,
            Some(&[(HOSTNAME, "n1")]),
        ))
        .capacity(csi_storage_capacity(
            "pool-n2",
            WAIT,
            Some("1Gi"),
            None,
            Some(&[(HOSTNAME, "n2")]),
        ));
    let handle = Handle::builder().objects(world.objects());
    let harness = PluginHarness::from_registry(NAME, None, handle).expect("registered");
    let nodes = node_infos(nodes(), &[]);
    // v1.37: StorageCapacityScoring is on by default, so PreScore runs and n1 scores
    // (v1.34 skipped; that case stays in pre_score_skips_without_the_gate_or_without_claims).
    insta::assert_yaml_snapshot!(
        "local_zonal_and_capacity",
        harness.run(&pod(&["db", "logs", "cache"]).info(), &nodes)
    );
    insta::assert_yaml_snapshot!("missing_claim", harness.run(&pod(&["nope"]).info(), &nodes));
    insta::assert_yaml_snapshot!(
        "no_claims",
        harness.run(&PodBuilder::new("plain").info(), &nodes)
    );
}

// ---------------------------------------------------------------------------------------
// Reserve and Unreserve

/// Runs PreFilter and Filter on every node, then Reserve on `node`; returns the state.
fn reserve_on(
    pl: &VolumeBinding,
    handle: &HandleControl,
    pod: &Arc<PodInfo>,
    node: &str,
) -> (CycleState, Status) {
    let infos = node_infos(nodes(), &[]);
    handle.set_snapshot(Arc::new(Snapshot::new(infos.clone())));
    let mut state = CycleState::new();
    let (_, s) = pl.pre_filter(&mut state, pod, &infos);
    assert!(s.is_success(), "{s:?}");
    for n in &infos {
        let _ = pl.filter(&state, pod, n);
    }
    let s = pl.reserve(&mut state, pod, node);
    (state, s)
}

fn filter_codes(pl: &VolumeBinding, pod: &Arc<PodInfo>) -> Vec<(String, String)> {
    let infos = node_infos(nodes(), &[]);
    let mut state = CycleState::new();
    let (_, s) = pl.pre_filter(&mut state, pod, &infos);
    if !s.is_success() {
        return vec![("prefilter".into(), s.message())];
    }
    infos
        .iter()
        .map(|n| (n.name().to_string(), pl.filter(&state, pod, n).message()))
        .collect()
}

#[test]
fn reserve_takes_the_volume_from_the_next_pod_and_unreserve_gives_it_back() {
    let world = World::new()
        .pvc(
            PvcBuilder::new("a")
                .storage_class(WAIT_STATIC)
                .request("1Gi"),
        )
        .pvc(
            PvcBuilder::new("b")
                .storage_class(WAIT_STATIC)
                .request("1Gi"),
        )
        .pv(avail("pv-small")
            .storage_class(WAIT_STATIC)
            .capacity("1Gi")
            .affinity(HOSTNAME, &["n1"]))
        .pv(avail("pv-large")
            .storage_class(WAIT_STATIC)
            .capacity("2Gi")
            .affinity(HOSTNAME, &["n1"]));
    let (pl, handle) = world.plugin_with(
        Arc::new(kubesched_framework::NoopClient),
        VolumeBindingArgs::default(),
    );
    let first = PodBuilder::new("first").pvc("a").info();
    let (mut state, s) = reserve_on(&pl, &handle, &first, "n1");
    assert!(s.is_success(), "{s:?}");
    // The smallest volume was assumed for "a".
    assert!(pl.caches.pvs.is_assumed("pv-small"));
    assert!(!pl.caches.pvs.is_assumed("pv-large"));
    let assumed = pl.caches.pvs.get("pv-small").expect("pv");
    let r = assumed
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .expect("claimRef");
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
        (Some("default"), Some("a"), Some("uid-a"))
    );
    assert_eq!(
        assumed
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_BOUND_BY_CONTROLLER))
            .map(String::as_str),
        Some("yes")
    );
    // The API's copy is untouched.
    assert!(
        pl.caches
            .pvs
            .get_api("pv-small")
            .expect("pv")
            .spec
            .as_ref()
            .is_some_and(|s| s.claim_ref.is_none())
    );

    // The next pod's claim gets the other volume.
    let second = PodBuilder::new("second").pvc("b").info();
    let (mut state2, s) = reserve_on(&pl, &handle, &second, "n1");
    assert!(s.is_success());
    assert!(pl.caches.pvs.is_assumed("pv-large"));
    // A third claim would find nothing.
    pl.unreserve(&mut state2, &second, "n1");
    assert!(!pl.caches.pvs.is_assumed("pv-large"));
    pl.unreserve(&mut state, &first, "n1");
    assert!(!pl.caches.pvs.is_assumed("pv-small"));
    // Unreserve is idempotent.
    pl.unreserve(&mut state, &first, "n1");
}

#[test]
fn a_claim_assumed_for_provisioning_pins_its_node_for_other_pods() {
    let world = World::new().pvc(PvcBuilder::new("shared").storage_class(WAIT).request("1Gi"));
    let (pl, handle) = world.plugin_with(
        Arc::new(kubesched_framework::NoopClient),
        VolumeBindingArgs::default(),
    );
    let first = PodBuilder::new("first").pvc("shared").info();
    let (mut state, s) = reserve_on(&pl, &handle, &first, "n2");
    assert!(s.is_success());
    let claim = pl.caches.pvcs.get("default/shared").expect("claim");
    assert_eq!(volume::selected_node(&claim), Some("n2"));
    let other = PodBuilder::new("other").pvc("shared").info();
    assert_eq!(
        filter_codes(&pl, &other),
        vec![
            ("n1".to_string(), ERR_REASON_BIND_CONFLICT.to_string()),
            ("n2".to_string(), String::new()),
            ("n3".to_string(), ERR_REASON_BIND_CONFLICT.to_string()),
        ]
    );
    pl.unreserve(&mut state, &first, "n2");
    assert!(filter_codes(&pl, &other).iter().all(|(_, m)| m.is_empty()));
}

#[test]
fn reserve_with_everything_bound_leaves_pre_bind_nothing_to_do() {
    let world = World::new()
        .pvc(
            PvcBuilder::new("data")
                .storage_class(WAIT_STATIC)
                .bound_to("pv1"),
        )
        .pv(avail("pv1")
            .storage_class(WAIT_STATIC)
            .bound_to("default", "data", "uid-data"));
    let (pl, handle) = world.plugin_with(Arc::new(Refusing), VolumeBindingArgs::default());
    let p = pod(&["data"]).info();
    let (state, s) = reserve_on(&pl, &handle, &p, "n1");
    assert!(s.is_success());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    assert!(rt.block_on(pl.pre_bind(&state, &p, "n1")).is_skip());
    // Without claims, Reserve and PreBind have nothing to do either.
    let plain = PodBuilder::new("plain").info();
    let mut state = CycleState::new();
    assert!(pl.reserve(&mut state, &plain, "n1").is_success());
    assert!(rt.block_on(pl.pre_bind(&state, &plain, "n1")).is_skip());
}

// ---------------------------------------------------------------------------------------
// PreBind

/// A client that refuses every write.
struct Refusing;

#[async_trait]
impl ClusterClient for Refusing {
    async fn bind(&self, _: &PodInfo, _: &str) -> Result<(), ClientError> {
        Err(ClientError::Other("refused".into()))
    }
    async fn delete_pod(&self, _: &PodInfo) -> Result<(), ClientError> {
        Err(ClientError::Other("refused".into()))
    }
    async fn update_pod_status(&self, _: &PodInfo, _: &PodStatusUpdate) -> Result<(), ClientError> {
        Err(ClientError::Other("refused".into()))
    }
    fn record_event(&self, _: Event) {}
    async fn update_persistent_volume(
        &self,
        _: &PersistentVolume,
    ) -> Result<PersistentVolume, ClientError> {
        Err(ClientError::Conflict(
            r#"Operation cannot be fulfilled on persistentvolumes "pv1": the object has been modified; please apply your changes to the latest version and try again"#.into(),
        ))
    }
    async fn update_persistent_volume_claim(
        &self,
        _: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, ClientError> {
        Err(ClientError::Other("refused".into()))
    }
}

/// How the test "PV controller" reacts to the scheduler's writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Controller {
    /// Binds at once.
    Binds,
    /// Does nothing.
    Idle,
    /// Gives up provisioning: removes the selected node.
    FailsProvisioning,
    /// Drops the volume's claimRef.
    ResetsClaimRef,
}

/// A client writing into the object store with numeric resourceVersions, playing the PV
/// controller as told.
struct ApiAndController {
    objects: Arc<ObjectStore>,
    controller: Controller,
    rv: parking_lot::Mutex<u64>,
}

impl ApiAndController {
    fn next_rv(&self) -> String {
        let mut rv = self.rv.lock();
        *rv += 1;
        rv.to_string()
    }
}

#[async_trait]
impl ClusterClient for ApiAndController {
    async fn bind(&self, _: &PodInfo, _: &str) -> Result<(), ClientError> {
        Ok(())
    }
    async fn delete_pod(&self, _: &PodInfo) -> Result<(), ClientError> {
        Ok(())
    }
    async fn update_pod_status(&self, _: &PodInfo, _: &PodStatusUpdate) -> Result<(), ClientError> {
        Ok(())
    }
    fn record_event(&self, _: Event) {}
    async fn update_persistent_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<PersistentVolume, ClientError> {
        let mut pv = pv.clone();
        pv.metadata.resource_version = Some(self.next_rv());
        self.objects.persistent_volumes.upsert(pv.clone());
        let r = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.clone())
            .expect("claimRef");
        match self.controller {
            Controller::Binds => {
                let name = r.name.clone().unwrap_or_default();
                let claim = self
                    .objects
                    .persistent_volume_claims
                    .get(r.namespace.as_deref(), &name)
                    .expect("claim");
                let mut claim = (*claim).clone();
                claim.spec.get_or_insert_with(Default::default).volume_name =
                    pv.metadata.name.clone();
                claim
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(ANN_BIND_COMPLETED.into(), "yes".into());
                claim.metadata.resource_version = Some(self.next_rv());
                self.objects.persistent_volume_claims.upsert(claim);
            }
            Controller::ResetsClaimRef => {
                let mut reset = pv.clone();
                reset.spec.get_or_insert_with(Default::default).claim_ref = None;
                reset.metadata.resource_version = Some(self.next_rv());
                self.objects.persistent_volumes.upsert(reset);
            }
            Controller::Idle | Controller::FailsProvisioning => {}
        }
        Ok(pv)
    }
    async fn update_persistent_volume_claim(
        &self,
        pvc: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, ClientError> {
        let mut pvc = pvc.clone();
        pvc.metadata.resource_version = Some(self.next_rv());
        self.objects.persistent_volume_claims.upsert(pvc.clone());
        let objects = self.objects.clone();
        let controller = self.controller;
        let rv = self.next_rv();
        let mut later = pvc.clone();
        // The controller answers a moment later, as a watch would deliver it.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            match controller {
                Controller::Binds => {
                    let name = format!("pvc-{}", later.metadata.uid.clone().unwrap_or_default());
                    objects.persistent_volumes.upsert(
                        avail(&name)
                            .storage_class(WAIT)
                            .bound_to(
                                "default",
                                later.metadata.name.as_deref().unwrap_or_default(),
                                later.metadata.uid.as_deref().unwrap_or_default(),
                            )
                            .affinity(HOSTNAME, &["n1"])
                            .build(),
                    );
                    later.spec.get_or_insert_with(Default::default).volume_name = Some(name);
                    later
                        .metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .insert(ANN_BIND_COMPLETED.into(), "yes".into());
                }
                Controller::FailsProvisioning => {
                    later
                        .metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .remove(ANN_SELECTED_NODE);
                }
                Controller::Idle | Controller::ResetsClaimRef => return,
            }
            later.metadata.resource_version = Some(rv);
            objects.persistent_volume_claims.upsert(later);
        });
        Ok(pvc)
    }
}

/// Reserves `pod` on n1 and runs PreBind with the given controller and timeout; returns
/// PreBind's status, the plugin (to look at its caches) and the objects.
async fn pre_bind_with(
    world: World,
    claims: &[&str],
    controller: Controller,
    timeout: i64,
) -> (Status, VolumeBinding, Arc<ObjectStore>) {
    let objects = world.objects();
    let client = Arc::new(ApiAndController {
        objects: objects.clone(),
        controller,
        rv: parking_lot::Mutex::new(100),
    });
    let handle = Handle::builder()
        .objects(objects.clone())
        .client(client)
        .build_with_control();
    let args = VolumeBindingArgs {
        bind_timeout_seconds: timeout,
        shape: None,
    };
    let pl = VolumeBinding::new(&args, &handle).expect("plugin");
    let p = pod(claims).info();
    let (mut state, s) = reserve_on(&pl, &handle, &p, "n1");
    assert!(s.is_success(), "{s:?}");
    let status = pl.pre_bind(&state, &p, "n1").await;
    if !status.is_success() {
        pl.unreserve(&mut state, &p, "n1");
    }
    (status, pl, objects)
}

fn static_world() -> World {
    World::new()
        .pvc(
            PvcBuilder::new("data")
                .storage_class(WAIT_STATIC)
                .request("1Gi")
                .resource_version("5"),
        )
        .pv(avail("pv1")
            .storage_class(WAIT_STATIC)
            .capacity("1Gi")
            .affinity(HOSTNAME, &["n1"])
            .resource_version("7"))
}

fn provision_world() -> World {
    World::new().pvc(
        PvcBuilder::new("data")
            .storage_class(WAIT)
            .request("1Gi")
            .resource_version("5"),
    )
}

#[tokio::test(start_paused = true)]
async fn pre_bind_binds_a_static_volume() {
    let (s, pl, objects) = pre_bind_with(static_world(), &["data"], Controller::Binds, 600).await;
    assert!(s.is_success(), "{s:?}");
    let pv = objects.persistent_volumes.get(None, "pv1").expect("pv");
    let r = pv
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .expect("claimRef written");
    assert_eq!(r.name.as_deref(), Some("data"));
    // The API now has what was assumed: the assumption is superseded.
    assert!(!pl.caches.pvs.is_assumed("pv1"));
    assert_eq!(pl.stage_errors.get("bind"), 0);
}

#[tokio::test(start_paused = true)]
async fn pre_bind_provisions_and_waits_for_the_controller() {
    let start = tokio::time::Instant::now();
    let (s, _, objects) = pre_bind_with(provision_world(), &["data"], Controller::Binds, 600).await;
    assert!(s.is_success(), "{s:?}");
    // Woken by the store change, not by a poll a second later.
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    let pvc = objects
        .persistent_volume_claims
        .get(Some("default"), "data")
        .expect("claim");
    assert!(volume::is_fully_bound(&pvc));
}

#[tokio::test(start_paused = true)]
async fn pre_bind_times_out_with_upstreams_error() {
    let start = tokio::time::Instant::now();
    let (s, pl, objects) = pre_bind_with(provision_world(), &["data"], Controller::Idle, 30).await;
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.reasons(), [ERR_BIND_TIMEOUT]);
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    // Counted as a bind stage error, nothing else.
    assert_eq!(pl.stage_errors.get("bind"), 1);
    assert_eq!(
        pl.stage_errors.get("predicate") + pl.stage_errors.get("assume"),
        0
    );
    // The selected node was written; Unreserve dropped the assumption.
    let pvc = objects
        .persistent_volume_claims
        .get(Some("default"), "data")
        .expect("claim");
    assert_eq!(volume::selected_node(&pvc), Some("n1"));
    assert!(!pl.caches.pvcs.is_assumed("default/data"));
    // Zero seconds: upstream gives up before looking.
    let (s, _, _) = pre_bind_with(provision_world(), &["data"], Controller::Binds, 0).await;
    assert_eq!(s.reasons(), [ERR_BIND_TIMEOUT]);
}

#[tokio::test(start_paused = true)]
async fn pre_bind_fails_when_the_controller_gives_up() {
    let (s, _, _) = pre_bind_with(
        provision_world(),
        &["data"],
        Controller::FailsProvisioning,
        600,
    )
    .await;
    assert_eq!(s.code(), Code::Error);
    assert_eq!(
        s.reasons(),
        [r#"binding volumes: provisioning failed for PVC "data""#]
    );
    let (s, _, _) = pre_bind_with(static_world(), &["data"], Controller::ResetsClaimRef, 600).await;
    assert_eq!(
        s.reasons(),
        [r#"binding volumes: ClaimRef got reset for pv "pv1""#]
    );
}

#[tokio::test(start_paused = true)]
async fn pre_bind_passes_the_api_error_on_and_drops_the_assumption() {
    let world = static_world();
    let handle = Handle::builder()
        .objects(world.objects())
        .client(Arc::new(Refusing))
        .build_with_control();
    let pl = VolumeBinding::new(&VolumeBindingArgs::default(), &handle).expect("plugin");
    let p = pod(&["data"]).info();
    let (state, s) = reserve_on(&pl, &handle, &p, "n1");
    assert!(s.is_success());
    assert!(pl.caches.pvs.is_assumed("pv1"));
    let s = pl.pre_bind(&state, &p, "n1").await;
    assert_eq!(s.code(), Code::Error);
    assert!(
        s.message()
            .starts_with("Operation cannot be fulfilled on persistentvolumes"),
        "{s:?}"
    );
    assert!(!pl.caches.pvs.is_assumed("pv1"));
    // On /metrics as upstream's VolumeBinding counts it.
    let text = handle.plugin_metrics().encode_openmetrics();
    assert!(
        text.contains("scheduler_volume_scheduling_stage_error_total{operation=\"bind\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE scheduler_volume_binder_cache_requests counter\n"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------
// Assume cache

#[test]
fn assume_cache_follows_the_api() {
    let world = World::new().pv(avail("pv1")
        .storage_class(WAIT_STATIC)
        .resource_version("10"));
    let objects = world.objects();
    let cache: assume_cache::AssumeCache<PersistentVolume> =
        assume_cache::AssumeCache::new("v1.PersistentVolume", objects.clone(), |o| {
            &o.persistent_volumes
        });
    let changed = avail("pv1")
        .storage_class(WAIT_STATIC)
        .resource_version("10")
        .label("x", "y")
        .build();
    cache.assume(changed).expect("assume");
    assert!(cache.get("pv1").expect("pv").metadata.labels.is_some());
    assert_eq!(cache.list().len(), 1);
    assert!(cache.list()[0].metadata.labels.is_some());
    // An older object is refused with upstream's words.
    assert_eq!(
        cache.assume(avail("pv1").resource_version("9").build()),
        Err(r#"v1.PersistentVolume "pv1" is out of sync (stored: 10, assume: 9)"#.to_string())
    );
    assert_eq!(
        cache.assume(avail("nope").build()),
        Err(r#"could not find v1.PersistentVolume "nope""#.to_string())
    );
    // The same version from the API (a relist) keeps the assumption; a newer one ends it.
    objects.persistent_volumes.upsert(
        avail("pv1")
            .storage_class(WAIT_STATIC)
            .resource_version("10")
            .build(),
    );
    assert!(cache.is_assumed("pv1"));
    objects.persistent_volumes.upsert(
        avail("pv1")
            .storage_class(WAIT_STATIC)
            .resource_version("11")
            .build(),
    );
    assert!(!cache.is_assumed("pv1"));
    assert!(cache.get("pv1").expect("pv").metadata.labels.is_none());
    // Without numeric versions any new API copy wins.
    objects.persistent_volumes.upsert(avail("pv2").build());
    cache
        .assume(avail("pv2").label("a", "b").build())
        .expect("assume");
    assert!(cache.is_assumed("pv2"));
    objects.persistent_volumes.upsert(avail("pv2").build());
    assert!(!cache.is_assumed("pv2"));
    // Gone from the API: gone from the cache.
    cache
        .assume(avail("pv2").label("a", "b").build())
        .expect("assume");
    objects.persistent_volumes.remove(None, "pv2");
    assert!(cache.get("pv2").is_none());
}

// ---------------------------------------------------------------------------------------
// Queueing hints

fn obj<K: Send + Sync + 'static>(k: K) -> EventObject {
    EventObject::object(Arc::new(k))
}

#[test]
fn queueing_hints() {
    use QueueingHint::{Queue, Skip};
    let p = PodBuilder::new("p")
        .pvc("data")
        .ephemeral_volume("scratch")
        .info();
    let claim = |ns: &str, name: &str| Some(obj(PvcBuilder::new(name).namespace(ns).build()));
    let h = |r: Result<QueueingHint, String>| r.expect("hint");
    assert_eq!(
        h(hints::after_claim_change(
            &p,
            None,
            claim("default", "data").as_ref()
        )),
        Queue
    );
    assert_eq!(
        h(hints::after_claim_change(
            &p,
            None,
            claim("default", "p-scratch").as_ref()
        )),
        Queue
    );
    assert_eq!(
        h(hints::after_claim_change(
            &p,
            None,
            claim("default", "other").as_ref()
        )),
        Skip
    );
    assert_eq!(
        h(hints::after_claim_change(
            &p,
            None,
            claim("elsewhere", "data").as_ref()
        )),
        Skip
    );
    // Without the object the hint cannot decide: Queue by the caller's rule.
    assert!(
        hints::after_claim_change(&p, Some(&EventObject::Other), Some(&EventObject::Other))
            .is_err()
    );

    let sc = |topo: Option<&str>| {
        let b = StorageClassBuilder::new("c", DRIVER);
        obj(match topo {
            Some(z) => b.allowed_topology(ZONE, &[z]),
            None => b,
        }
        .build())
    };
    assert_eq!(
        h(hints::after_class_change(&p, None, Some(&sc(None)))),
        Queue
    );
    assert_eq!(
        h(hints::after_class_change(
            &p,
            Some(&sc(None)),
            Some(&sc(Some("a")))
        )),
        Queue
    );
    assert_eq!(
        h(hints::after_class_change(
            &p,
            Some(&sc(Some("a"))),
            Some(&sc(Some("a")))
        )),
        Skip
    );

    let cn = |m: Option<&str>| {
        let mut n = csi_node("n1", &[]);
        n.metadata.annotations = m.map(|m| {
            std::collections::BTreeMap::from([(
                volume::ANN_MIGRATED_PLUGINS.to_string(),
                m.to_string(),
            )])
        });
        obj(n)
    };
    assert_eq!(
        h(hints::after_csi_node_change(&p, None, Some(&cn(None)))),
        Queue
    );
    assert_eq!(
        h(hints::after_csi_node_change(
            &p,
            Some(&cn(None)),
            Some(&cn(Some("kubernetes.io/aws-ebs")))
        )),
        Queue
    );
    assert_eq!(
        h(hints::after_csi_node_change(
            &p,
            Some(&cn(Some("x"))),
            Some(&cn(Some("x")))
        )),
        Skip
    );

    let cap = |c: Option<&str>, m: Option<&str>| obj(csi_storage_capacity("c", WAIT, c, m, None));
    assert_eq!(
        h(hints::after_capacity_change(
            &p,
            None,
            Some(&cap(Some("1Gi"), None))
        )),
        Queue
    );
    assert_eq!(
        h(hints::after_capacity_change(
            &p,
            Some(&cap(Some("1Gi"), None)),
            Some(&cap(Some("2Gi"), None))
        )),
        Queue
    );
    assert_eq!(
        h(hints::after_capacity_change(
            &p,
            Some(&cap(Some("2Gi"), None)),
            Some(&cap(Some("1Gi"), None))
        )),
        Skip
    );
    // The maximum volume size is what counts when it is set.
    assert_eq!(
        h(hints::after_capacity_change(
            &p,
            Some(&cap(Some("1Gi"), Some("1Gi"))),
            Some(&cap(Some("5Gi"), Some("1Gi")))
        )),
        Skip
    );
    assert_eq!(
        h(hints::after_capacity_change(
            &p,
            Some(&cap(None, None)),
            Some(&cap(Some("1Gi"), None))
        )),
        Queue
    );
    assert_eq!(
        h(hints::after_capacity_change(
            &p,
            Some(&cap(Some("1Gi"), None)),
            Some(&cap(None, None))
        )),
        Skip
    );

    let inline = PodBuilder::new("q")
        .with(|p| {
            p.spec.get_or_insert_with(Default::default).volumes = Some(vec![
                kubesched_framework::model::k8s_openapi::api::core::v1::Volume {
                    name: "v".into(),
                    csi: Some(
                        kubesched_framework::model::k8s_openapi::api::core::v1::CSIVolumeSource {
                            driver: DRIVER.into(),
                            ..Default::default()
                        },
                    ),
                    ..Default::default()
                },
            ]);
        })
        .info();
    let drv = |tracks: bool| obj(csi_driver(DRIVER, tracks));
    assert_eq!(
        h(hints::after_csi_driver_change(
            &inline,
            Some(&drv(true)),
            Some(&drv(false))
        )),
        Queue
    );
    assert_eq!(
        h(hints::after_csi_driver_change(
            &inline,
            Some(&drv(false)),
            Some(&drv(true))
        )),
        Skip
    );
    assert_eq!(
        h(hints::after_csi_driver_change(
            &p,
            Some(&drv(true)),
            Some(&drv(false))
        )),
        Skip
    );
}

#[test]
fn registered_events_match_upstream() {
    let pl = World::new().plugin();
    let events: Vec<String> = pl
        .events_to_register()
        .iter()
        .map(|e| {
            format!(
                "{}{} hint={}",
                e.event.resource.as_str(),
                e.event.action,
                e.hint.is_some()
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            "StorageClassAdd|UpdateNodeAllocatable|UpdateNodeLabel|UpdateNodeTaint|UpdateNodeCondition|UpdateNodeAnnotation|UpdatePodLabel|UpdatePodScaleDown|UpdatePodToleration|UpdatePodSchedulingGatesEliminated|Update|UpdatePodGeneratedResourceClaim|UpdateNodeDeclaredFeature hint=true",
            "PersistentVolumeClaimAdd|UpdateNodeAllocatable|UpdateNodeLabel|UpdateNodeTaint|UpdateNodeCondition|UpdateNodeAnnotation|UpdatePodLabel|UpdatePodScaleDown|UpdatePodToleration|UpdatePodSchedulingGatesEliminated|Update|UpdatePodGeneratedResourceClaim|UpdateNodeDeclaredFeature hint=true",
            "PersistentVolumeAdd|UpdateNodeAllocatable|UpdateNodeLabel|UpdateNodeTaint|UpdateNodeCondition|UpdateNodeAnnotation|UpdatePodLabel|UpdatePodScaleDown|UpdatePodToleration|UpdatePodSchedulingGatesEliminated|Update|UpdatePodGeneratedResourceClaim|UpdateNodeDeclaredFeature hint=false",
            "NodeAdd|UpdateNodeLabel hint=false",
            "CSINodeAdd|UpdateNodeAllocatable|UpdateNodeLabel|UpdateNodeTaint|UpdateNodeCondition|UpdateNodeAnnotation|UpdatePodLabel|UpdatePodScaleDown|UpdatePodToleration|UpdatePodSchedulingGatesEliminated|Update|UpdatePodGeneratedResourceClaim|UpdateNodeDeclaredFeature hint=true",
            "CSIDriverUpdate hint=true",
            "CSIStorageCapacityAdd|UpdateNodeAllocatable|UpdateNodeLabel|UpdateNodeTaint|UpdateNodeCondition|UpdateNodeAnnotation|UpdatePodLabel|UpdatePodScaleDown|UpdatePodToleration|UpdatePodSchedulingGatesEliminated|Update|UpdatePodGeneratedResourceClaim|UpdateNodeDeclaredFeature hint=true",
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Args

#[test]
fn args_default_round_trip_and_validation() {
    let desc = registry::find(NAME).expect("registered");
    assert_eq!(desc.args.kind, Some("VolumeBindingArgs"));
    // v1.37 (StorageCapacityScoring on): the default shape is filled in, as `/configz`
    // shows it; v1.34 (gate off): no shape.
    let v1_37 = FeatureGates::defaults();
    let v1_34 = FeatureGates::defaults_at(kubesched_framework::Version::V1_34);
    let defaulted = VolumeBindingArgs {
        shape: Some(default_shape()),
        ..VolumeBindingArgs::default()
    };
    let decoded = (desc.args.decode)(None, &v1_37).expect("defaults");
    assert_eq!(decoded.get::<VolumeBindingArgs>(), Some(&defaulted));
    assert_eq!(
        decoded.effective,
        Some(serde_json::json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "VolumeBindingArgs",
            "bindTimeoutSeconds": 600,
            "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
        }))
    );
    let old = (desc.args.decode)(None, &v1_34).expect("defaults");
    assert_eq!(
        old.get::<VolumeBindingArgs>(),
        Some(&VolumeBindingArgs::default())
    );
    assert_eq!(
        old.effective,
        Some(serde_json::json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "VolumeBindingArgs",
            "bindTimeoutSeconds": 600
        }))
    );
    // Round trip through the effective form, under the gates it was written with; v1.37's
    // form is refused by v1.34, as upstream refuses a shape with the gate off.
    let again = (desc.args.decode)(decoded.effective.as_ref(), &v1_37).expect("round trip");
    assert_eq!(again.get::<VolumeBindingArgs>(), Some(&defaulted));
    let again = (desc.args.decode)(old.effective.as_ref(), &v1_34).expect("round trip");
    assert_eq!(
        again.get::<VolumeBindingArgs>(),
        Some(&VolumeBindingArgs::default())
    );
    assert!(
        (desc.args.decode)(decoded.effective.as_ref(), &v1_34)
            .expect_err("shape with the gate off")
            .message
            .ends_with("unsupported when StorageCapacityScoring feature is disabled")
    );
    let set = (desc.args.decode)(
        Some(&serde_json::json!({"bindTimeoutSeconds": 30})),
        &kubesched_framework::FeatureGates::defaults(),
    )
    .expect("valid");
    assert_eq!(
        set.get::<VolumeBindingArgs>()
            .map(|a| a.bind_timeout_seconds),
        Some(30)
    );
    // Validation, with upstream's words.
    let bad = |v: serde_json::Value| {
        (desc.args.decode)(Some(&v), &kubesched_framework::FeatureGates::defaults())
            .expect_err("invalid")
            .message
    };
    assert_eq!(
        bad(serde_json::json!({"bindTimeoutSeconds": -1})),
        "invalid VolumeBindingArgs: bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"
    );
    // A shape's points are checked when decoding; whether a shape may be set at all
    // depends on the gate (`scoring_shape_follows_the_gate`).
    assert_eq!(
        bad(
            serde_json::json!({"shape": [{"utilization": 50, "score": 0}, {"utilization": 50, "score": 11}]})
        ),
        "invalid VolumeBindingArgs: [shape[1].utilization: Invalid value: 50: utilization values must be sorted in increasing order, shape[1].score: Invalid value: 11: not in valid range [0, 10]]"
    );
    assert!(
        (desc.args.decode)(Some(&serde_json::json!({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]})), &kubesched_framework::FeatureGates::defaults())
            .is_ok()
    );
    assert!(
        bad(serde_json::json!({"bindTimeout": 1}))
            .starts_with("decoding VolumeBindingArgs: unknown field `bindTimeout`")
    );
    assert_eq!(
        VolumeBindingArgs::default().validate(&FeatureGates::defaults()),
        Ok(())
    );
}

#[test]
fn registration_lists_the_implemented_points() {
    let desc = registry::find(NAME).expect("registered");
    let pl = World::new().plugin();
    assert_eq!(
        desc.extension_points().to_vec(),
        kubesched_framework::implemented_points(&pl).as_slice()
    );
    // Pods without claims Skip PreFilter and need no state.
    let mut state = CycleState::new();
    let (r, s) = pl.pre_filter(
        &mut state,
        &PodBuilder::new("plain").info(),
        &[node_info(NodeBuilder::new("n1"), &[])],
    );
    assert!(r.is_none() && s.is_skip());
    assert!(state.read::<CycleData>().is_none());
}

// ---------------------------------------------------------------------------------------
// Score (StorageCapacityScoring)

fn gates(storage_capacity_scoring: bool) -> kubesched_framework::FeatureGates {
    kubesched_framework::FeatureGates::defaults()
        .with(Feature::StorageCapacityScoring, storage_capacity_scoring)
        .expect("settable gate")
}

/// The plugin over `world` with StorageCapacityScoring set as given.
fn plugin_with_gate(
    world: &World,
    args: &VolumeBindingArgs,
    storage_capacity_scoring: bool,
) -> Result<VolumeBinding, PluginError> {
    let handle = Handle::builder()
        .objects(world.objects())
        .client(Arc::new(kubesched_framework::NoopClient))
        .features(gates(storage_capacity_scoring))
        .build();
    VolumeBinding::new(args, &handle)
}

fn shape(points: &[(i32, i32)]) -> Vec<UtilizationShapePoint> {
    points
        .iter()
        .map(|&(utilization, score)| UtilizationShapePoint { utilization, score })
        .collect()
}

#[test]
fn scoring_shape_follows_the_gate() {
    let world = World::new();
    let with_shape = VolumeBindingArgs {
        shape: Some(shape(&[(0, 0), (100, 10)])),
        ..VolumeBindingArgs::default()
    };
    // Gate off (v1.34's default): no scorer, and a shape is refused with upstream's words.
    let off = plugin_with_gate(&world, &VolumeBindingArgs::default(), false).expect("valid");
    assert!(off.scorer.is_none());
    assert_eq!(
        plugin_with_gate(&world, &with_shape, false)
            .expect_err("refused")
            .to_string(),
        "VolumeBinding: invalid VolumeBindingArgs: shape: Invalid value: []config.UtilizationShapePoint{config.UtilizationShapePoint{Utilization:0, Score:0}, config.UtilizationShapePoint{Utilization:100, Score:10}}: unsupported when StorageCapacityScoring feature is disabled"
    );
    // Gate on: the default shape prefers empty storage; a set shape is used.
    assert_eq!(
        VolumeBindingArgs::default().scoring_shape(true),
        Ok(Some(shape(&[(0, 10), (100, 0)])))
    );
    assert_eq!(
        VolumeBindingArgs {
            shape: Some(Vec::new()),
            ..VolumeBindingArgs::default()
        }
        .scoring_shape(true),
        Ok(Some(default_shape()))
    );
    assert_eq!(
        with_shape.scoring_shape(true),
        Ok(Some(shape(&[(0, 0), (100, 10)])))
    );
    assert!(
        plugin_with_gate(&world, &with_shape, true)
            .expect("valid")
            .scorer
            .is_some()
    );
    assert_eq!(
        VolumeBindingArgs {
            shape: Some(shape(&[(-1, 0), (101, 10)])),
            ..VolumeBindingArgs::default()
        }
        .scoring_shape(true),
        Err("[shape[0].utilization: Invalid value: -1: not in valid range [0, 100], shape[1].utilization: Invalid value: 101: not in valid range [0, 100]]".into())
    );
}

#[test]
fn scorer_function_table() {
    let gib = |n: i128| n << 30;
    let one = |requested: i128, capacity: i128| {
        BTreeMap::from([(
            "c",
            ClassStorage {
                requested: gib(requested),
                capacity: gib(capacity),
            },
        )])
    };
    let least = Scorer::new(&default_shape());
    let most = Scorer::new(&shape(&[(0, 0), (100, 10)]));
    let stepped = Scorer::new(&shape(&[(20, 2), (60, 8)]));
    let cases: &[(&str, &Scorer, BTreeMap<&str, ClassStorage>, i64)] = &[
        ("nothing to score", &least, BTreeMap::new(), 0),
        ("empty storage, default shape", &least, one(0, 100), 100),
        ("a quarter used", &least, one(25, 100), 75),
        ("a quarter used, packing shape", &most, one(25, 100), 25),
        ("over capacity counts as full", &least, one(101, 100), 0),
        ("unknown capacity counts as full", &most, one(1, 0), 100),
        ("before the first point", &stepped, one(10, 100), 20),
        ("between points", &stepped, one(40, 100), 50),
        ("after the last point", &stepped, one(90, 100), 80),
        (
            "classes averaged and rounded",
            &least,
            BTreeMap::from([
                (
                    "a",
                    ClassStorage {
                        requested: gib(1),
                        capacity: gib(2),
                    },
                ),
                (
                    "b",
                    ClassStorage {
                        requested: gib(1),
                        capacity: gib(3),
                    },
                ),
            ]),
            // (50 + 67) / 2 = 58.5
            59,
        ),
    ];
    for (name, scorer, classes, want) in cases {
        assert_eq!(scorer.score(classes), *want, "{name}");
    }
}

/// Runs the pod through PreFilter, Filter, PreScore and Score on the three nodes with
/// StorageCapacityScoring on.
fn run_scored(world: &World, pod: PodBuilder) -> PluginRun {
    let pl = plugin_with_gate(world, &VolumeBindingArgs::default(), true).expect("valid");
    PluginHarness::new(pl).run(&pod.info(), &node_infos(nodes(), &[]))
}

#[test]
fn score_static_bindings_by_how_full_the_chosen_volumes_are() {
    let claim = PvcBuilder::new("data")
        .storage_class(WAIT_STATIC)
        .request("5Gi");
    let local = |name: &str, node: &str, size: &str| {
        avail(name)
            .storage_class(WAIT_STATIC)
            .capacity(size)
            .affinity(HOSTNAME, &[node])
    };
    let world = World::new()
        .pvc(claim)
        .pv(local("pv-n1", "n1", "5Gi"))
        .pv(local("pv-n2", "n2", "20Gi"));
    let r = run_scored(&world, pod(&["data"]));
    assert_eq!(
        r.pre_score.as_ref().map(|s| s.code.as_str()),
        Some("Success")
    );
    // n1's volume would be full, n2's a quarter used; n3 has no volume.
    assert_eq!(r.score_of("n1"), Some(0));
    assert_eq!(r.score_of("n2"), Some(75));
    assert_eq!(
        r.filter_of("n3").map(|s| s.code.as_str()),
        Some("UnschedulableAndUnresolvable")
    );
    insta::assert_yaml_snapshot!(r);
}

#[test]
fn score_provisioning_by_how_full_the_pool_is() {
    let claim = PvcBuilder::new("data").storage_class(WAIT).request("10Gi");
    let world = World::new()
        .pvc(claim)
        .driver(csi_driver(DRIVER, true))
        .capacity(csi_storage_capacity(
            "zone-a",
            WAIT,
            Some("100Gi"),
            None,
            Some(&[(ZONE, "a")]),
        ))
        .capacity(csi_storage_capacity(
            "zone-b",
            WAIT,
            Some("20Gi"),
            None,
            Some(&[(ZONE, "b")]),
        ));
    let r = run_scored(&world, pod(&["data"]));
    assert_eq!(r.score_of("n1"), Some(90));
    assert_eq!(r.score_of("n2"), Some(90));
    assert_eq!(r.score_of("n3"), Some(50));
    // Two claims of one class ask the same pool: requests add up, the pool counts once.
    let world = world.pvc(PvcBuilder::new("logs").storage_class(WAIT).request("10Gi"));
    let r = run_scored(&world, pod(&["data", "logs"]));
    assert_eq!(r.score_of("n1"), Some(80));
    assert_eq!(r.score_of("n3"), Some(0));
    // A driver without capacity tracking gives nothing to score.
    let untracked = World::new()
        .pvc(PvcBuilder::new("data").storage_class(WAIT).request("10Gi"))
        .driver(csi_driver(DRIVER, false));
    let r = run_scored(&untracked, pod(&["data"]));
    assert_eq!(r.score_of("n1"), Some(0));
}

#[test]
fn pre_score_skips_without_the_gate_or_without_claims() {
    let world = World::new()
        .pvc(PvcBuilder::new("data").storage_class(WAIT).request("1Gi"))
        .driver(csi_driver(DRIVER, true))
        .capacity(csi_storage_capacity(
            "c",
            WAIT,
            Some("10Gi"),
            None,
            Some(&[(ZONE, "a")]),
        ));
    let code = |r: &PluginRun| r.pre_score.as_ref().map(|s| s.code.clone());
    // Without the gate (v1.34's default: alpha and off) PreScore skips.
    let v1_34 = Handle::builder()
        .objects(world.objects())
        .client(Arc::new(kubesched_framework::NoopClient))
        .features(kubesched_framework::FeatureGates::defaults_at(
            kubesched_framework::Version::V1_34,
        ))
        .build();
    let off = VolumeBinding::new(&VolumeBindingArgs::default(), &v1_34).expect("valid");
    let r = PluginHarness::new(off).run(&pod(&["data"]).info(), &node_infos(nodes(), &[]));
    assert_eq!(code(&r), Some("Skip".into()));
    let off = plugin_with_gate(&world, &VolumeBindingArgs::default(), false).expect("valid");
    let r = PluginHarness::new(off).run(&pod(&["data"]).info(), &node_infos(nodes(), &[]));
    assert_eq!(code(&r), Some("Skip".into()));
    // v1.37 turns StorageCapacityScoring on by default (beta): the default plugin scores.
    assert_eq!(code(&run(&world, pod(&["data"]))), Some("Success".into()));
    assert_eq!(code(&run_scored(&world, pod(&[]))), Some("Skip".into()));
    assert_eq!(
        code(&run_scored(&world, pod(&["data"]))),
        Some("Success".into())
    );
}
