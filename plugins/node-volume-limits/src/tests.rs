use super::*;
use kubesched_framework::events::ClusterEvent;
use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::registry;
use kubesched_testing::{
    Churn, NodeBuilder, PluginHarness, PodBuilder, PvBuilder, PvcBuilder, csi_node, node_info,
    storage_class, volume, volume_attachment,
};
use std::collections::BTreeMap;

const EBS: &str = "ebs.csi.aws.com";
const PD: &str = "pd.csi.storage.gke.io";
const NODE: &str = "n1";

/// The cluster of a test: claims `<driver>-<i>` bound to CSI volumes of the same name, for
/// i in 0..4, plus whatever a case adds.
#[derive(Default)]
struct Cluster {
    objects: ObjectStore,
}

impl Cluster {
    fn new(drivers: &[&str]) -> Self {
        let c = Self::default();
        for d in drivers {
            for i in 0..4 {
                let name = format!("{d}-{i}");
                c.objects
                    .persistent_volumes
                    .upsert(PvBuilder::new(&name).csi(d, &name).build());
                c.objects
                    .persistent_volume_claims
                    .upsert(PvcBuilder::new(&name).bound_to(&name).build());
            }
        }
        c
    }
    fn pv(self, pv: api::PersistentVolume) -> Self {
        self.objects.persistent_volumes.upsert(pv);
        self
    }
    fn pvc(self, pvc: api::PersistentVolumeClaim) -> Self {
        self.objects.persistent_volume_claims.upsert(pvc);
        self
    }
    fn class(self, name: &str, provisioner: &str) -> Self {
        self.objects
            .storage_classes
            .upsert(storage_class(name, provisioner, Some(true)));
        self
    }
    fn limits(self, drivers: &[(&str, Option<i32>)]) -> Self {
        self.objects.csi_nodes.upsert(csi_node(NODE, drivers));
        self
    }
    fn attachment(self, name: &str, attacher: &str, pv: &str) -> Self {
        self.objects
            .volume_attachments
            .upsert(volume_attachment(name, NODE, attacher, pv));
        self
    }
    fn harness(self) -> PluginHarness {
        let handle = Handle::builder().objects(Arc::new(self.objects));
        PluginHarness::from_registry(NAME, None, handle).expect("registered")
    }
}

fn claims(name: &str, claims: &[&str]) -> PodBuilder {
    claims.iter().fold(PodBuilder::new(name), |b, c| b.pvc(c))
}

fn ebs_inline(name: &str, id: &str) -> api::Volume {
    volume(name, |v| {
        v.aws_elastic_block_store = Some(api::AWSElasticBlockStoreVolumeSource {
            volume_id: id.into(),
            ..Default::default()
        })
    })
}

/// Filter's verdict for `pod` on the node running `existing`.
fn verdict(cluster: Cluster, pod: PodBuilder, existing: Vec<PodBuilder>) -> String {
    let existing: Vec<_> = existing.into_iter().map(|p| p.node(NODE).info()).collect();
    let node = node_info(NodeBuilder::new(NODE), &existing);
    let run = cluster.harness().run(&pod.info(), &[node]);
    match run.nodes[0].filter.as_ref() {
        None => run.pre_filter.expect("ran").code,
        Some(s) if s.reasons.is_empty() => s.code.clone(),
        Some(s) => format!("{}: {}", s.code, s.reasons.join(", ")),
    }
}

const FITS: &str = "Success";
const FULL: &str = "Unschedulable: node(s) exceed max volume count";

#[test]
fn csi_limit_table() {
    let ebs = |i: usize| format!("{EBS}-{i}");
    let table: Vec<(&str, Cluster, PodBuilder, Vec<PodBuilder>, &str)> = vec![
        (
            "room left",
            Cluster::new(&[EBS]).limits(&[(EBS, Some(4))]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &[&ebs(1), &ebs(2)])],
            FITS,
        ),
        (
            "limit reached",
            Cluster::new(&[EBS]).limits(&[(EBS, Some(2))]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &[&ebs(1), &ebs(2)])],
            FULL,
        ),
        (
            "a volume already on the node takes no new slot",
            Cluster::new(&[EBS]).limits(&[(EBS, Some(2))]),
            claims("p", &[&ebs(1)]),
            vec![claims("a", &[&ebs(1), &ebs(2)])],
            FITS,
        ),
        (
            "a volume shared by two running pods counts once",
            Cluster::new(&[EBS]).limits(&[(EBS, Some(2))]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &[&ebs(1)]), claims("b", &[&ebs(1)])],
            FITS,
        ),
        (
            "the driver has no limit",
            Cluster::new(&[EBS]).limits(&[(EBS, None)]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &[&ebs(1), &ebs(2)])],
            FITS,
        ),
        (
            "no CSINode",
            Cluster::new(&[EBS]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &[&ebs(1), &ebs(2)])],
            FITS,
        ),
        (
            "other drivers' volumes do not count",
            Cluster::new(&[EBS, PD]).limits(&[(EBS, Some(2)), (PD, Some(2))]),
            claims("p", &[&ebs(0)]),
            vec![claims(
                "a",
                &[&format!("{PD}-0"), &format!("{PD}-1"), &ebs(1)],
            )],
            FITS,
        ),
        (
            "two new volumes over the limit at once",
            Cluster::new(&[EBS]).limits(&[(EBS, Some(1))]),
            claims("p", &[&ebs(0), &ebs(1)]),
            vec![],
            FULL,
        ),
        (
            "an unbound claim counts under its class's provisioner",
            Cluster::new(&[EBS])
                .class("ebs", EBS)
                .pvc(PvcBuilder::new("pending").storage_class("ebs").build())
                .limits(&[(EBS, Some(2))]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &["pending", &ebs(1)])],
            FULL,
        ),
        (
            "two pods with the same unbound claim count it once",
            Cluster::new(&[EBS])
                .class("ebs", EBS)
                .pvc(PvcBuilder::new("pending").storage_class("ebs").build())
                .limits(&[(EBS, Some(3))]),
            claims("p", &[&ebs(0)]),
            vec![
                claims("a", &["pending", &ebs(1)]),
                claims("b", &["pending"]),
            ],
            FITS,
        ),
        (
            "a claim bound to a missing volume counts by its class",
            Cluster::new(&[EBS])
                .class("ebs", EBS)
                .pvc(
                    PvcBuilder::new("lost")
                        .storage_class("ebs")
                        .bound_to("gone")
                        .build(),
                )
                .limits(&[(EBS, Some(2))]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &["lost", &ebs(1)])],
            FULL,
        ),
        (
            "an unbound claim without a class is not counted",
            Cluster::new(&[EBS])
                .pvc(PvcBuilder::new("classless").build())
                .limits(&[(EBS, Some(2))]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &["classless", &ebs(1)])],
            FITS,
        ),
        (
            "a running pod's missing claim is not counted",
            Cluster::new(&[EBS]).limits(&[(EBS, Some(2))]),
            claims("p", &[&ebs(0)]),
            vec![claims("a", &["missing", &ebs(1)])],
            FITS,
        ),
        (
            "a host path volume is not attachable",
            Cluster::new(&[EBS])
                .pv(PvBuilder::new("local").host_path("/tmp").build())
                .pvc(PvcBuilder::new("local").bound_to("local").build())
                .limits(&[(EBS, Some(1))]),
            claims("p", &["local"]),
            vec![claims("a", &[&ebs(1)])],
            FITS,
        ),
    ];
    for (name, cluster, pod, existing, want) in table {
        assert_eq!(verdict(cluster, pod, existing), want, "{name}");
    }
}

#[test]
fn migrated_in_tree_volumes_count_against_their_driver() {
    let in_tree = || {
        Cluster::new(&[EBS])
            .pv(PvBuilder::new("intree-0").aws_ebs("vol-0").build())
            .pv(PvBuilder::new("intree-1")
                .aws_ebs("aws://us-east-1a/vol-1")
                .build())
            .pvc(PvcBuilder::new("intree-0").bound_to("intree-0").build())
            .pvc(PvcBuilder::new("intree-1").bound_to("intree-1").build())
            .class("gp2", "kubernetes.io/aws-ebs")
            .pvc(PvcBuilder::new("gp2").storage_class("gp2").build())
    };
    let ebs0 = format!("{EBS}-0");
    let cases: Vec<(&str, Cluster, PodBuilder, Vec<PodBuilder>, &str)> = vec![
        (
            "in-tree claims",
            in_tree().limits(&[(EBS, Some(2))]),
            claims("p", &[&ebs0]),
            vec![claims("a", &["intree-0", "intree-1"])],
            FULL,
        ),
        (
            "an in-tree class's pending claim",
            in_tree().limits(&[(EBS, Some(2))]),
            claims("p", &["gp2"]),
            vec![claims("a", &["intree-0", "intree-1"])],
            FULL,
        ),
        (
            "an inline EBS volume",
            in_tree().limits(&[(EBS, Some(2))]),
            PodBuilder::new("p").volume(ebs_inline("v", "vol-9")),
            vec![claims("a", &["intree-0", &ebs0])],
            FULL,
        ),
        (
            "the inline form of a volume already there (URL form) is the same volume",
            in_tree().limits(&[(EBS, Some(2))]),
            PodBuilder::new("p").volume(ebs_inline("v", "vol-1")),
            vec![claims("a", &["intree-0", "intree-1"])],
            FITS,
        ),
        (
            "without a CSINode migration is off and nothing is limited",
            in_tree(),
            PodBuilder::new("p").volume(ebs_inline("v", "vol-9")),
            vec![claims("a", &["intree-0", "intree-1"])],
            FITS,
        ),
        (
            "vSphere volumes are not counted",
            in_tree().limits(&[("csi.vsphere.vmware.com", Some(0))]),
            PodBuilder::new("p").volume(volume("v", |v| {
                v.vsphere_volume = Some(api::VsphereVirtualDiskVolumeSource {
                    volume_path: "[ds] disk.vmdk".into(),
                    ..Default::default()
                })
            })),
            vec![],
            FITS,
        ),
    ];
    for (name, cluster, pod, existing, want) in cases {
        assert_eq!(verdict(cluster, pod, existing), want, "{name}");
    }
}

#[test]
fn generic_ephemeral_volumes() {
    let pod = || {
        PodBuilder::new("abc")
            .uid("uid-abc")
            .ephemeral_volume("scratch")
    };
    let owned = PvcBuilder::new("abc-scratch")
        .storage_class("ebs")
        .owned_by_pod("abc", "uid-abc")
        .build();
    let stolen = PvcBuilder::new("abc-scratch").storage_class("ebs").build();
    let base = |claim: Option<api::PersistentVolumeClaim>| {
        let c = Cluster::new(&[EBS])
            .class("ebs", EBS)
            .limits(&[(EBS, Some(1))]);
        match claim {
            Some(claim) => c.pvc(claim),
            None => c,
        }
    };
    assert_eq!(verdict(base(Some(owned.clone())), pod(), vec![]), FITS);
    assert_eq!(
        verdict(
            base(Some(owned)),
            pod(),
            vec![claims("a", &[&format!("{EBS}-1")])]
        ),
        FULL
    );
    assert_eq!(
        verdict(base(Some(stolen)), pod(), vec![]),
        "Error: PVC default/abc-scratch was not created for pod default/abc (pod is not owner)"
    );
    assert_eq!(
        verdict(base(None), pod(), vec![]),
        "UnschedulableAndUnresolvable: looking up PVC default/abc-scratch: persistentvolumeclaim \"abc-scratch\" not found"
    );
}

#[test]
fn volume_attachments_take_slots() {
    let ebs = |i: usize| format!("{EBS}-{i}");
    // Two attachments on the node and a limit of 2: a third volume does not fit, even
    // when it is one of the attached ones (upstream compares attachments only with the
    // volumes of running pods).
    let attached = || {
        Cluster::new(&[EBS])
            .limits(&[(EBS, Some(2))])
            .attachment("va-0", EBS, &ebs(0))
            .attachment("va-1", EBS, &ebs(1))
    };
    assert_eq!(verdict(attached(), claims("p", &[&ebs(2)]), vec![]), FULL);
    assert_eq!(verdict(attached(), claims("p", &[&ebs(0)]), vec![]), FULL);
    // One attachment: room for one more.
    let one = Cluster::new(&[EBS])
        .limits(&[(EBS, Some(2))])
        .attachment("va-0", EBS, &ebs(0));
    assert_eq!(verdict(one, claims("p", &[&ebs(2)]), vec![]), FITS);
    // An attachment of a volume a running pod uses counts once.
    let shared = Cluster::new(&[EBS])
        .limits(&[(EBS, Some(2))])
        .attachment("va-1", EBS, &ebs(1));
    assert_eq!(
        verdict(
            shared,
            claims("p", &[&ebs(2)]),
            vec![claims("a", &[&ebs(1)])]
        ),
        FITS
    );
    // Attachments to other nodes, of unknown or non-CSI volumes, do not count.
    let elsewhere = Cluster::new(&[EBS])
        .limits(&[(EBS, Some(1))])
        .pv(PvBuilder::new("intree").aws_ebs("vol-7").build());
    elsewhere
        .objects
        .volume_attachments
        .upsert(volume_attachment("va-x", "other-node", EBS, &ebs(0)));
    let elsewhere = elsewhere
        .attachment("va-ghost", EBS, "no-such-pv")
        .attachment("va-intree", EBS, "intree");
    assert_eq!(verdict(elsewhere, claims("p", &[&ebs(2)]), vec![]), FITS);
}

#[test]
fn pre_filter_skips_pods_without_attachable_volumes() {
    let h = Cluster::new(&[EBS]).harness();
    let node = node_info(NodeBuilder::new(NODE), &[]);
    let skip = |pod: PodBuilder| {
        h.run(&pod.info(), std::slice::from_ref(&node))
            .pre_filter
            .expect("ran")
            .code
    };
    assert_eq!(skip(PodBuilder::new("plain")), "Skip");
    assert_eq!(
        skip(PodBuilder::new("cm").volume(volume("cm", |v| {
            v.config_map = Some(api::ConfigMapVolumeSource::default())
        }))),
        "Skip"
    );
    assert_eq!(skip(PodBuilder::new("c").pvc("x")), "Success");
    assert_eq!(skip(PodBuilder::new("e").ephemeral_volume("x")), "Success");
    assert_eq!(
        skip(PodBuilder::new("i").volume(ebs_inline("v", "vol-1"))),
        "Success"
    );
}

#[test]
fn registers_upstream_events() {
    let plugin = NodeVolumeLimits::new(&Handle::default()).expect("built");
    let events = plugin.events_to_register();
    let kinds: Vec<ClusterEvent> = events.iter().map(|e| e.event).collect();
    assert_eq!(
        kinds,
        vec![
            ClusterEvent::new(EventResource::CSINode, ActionType::ADD),
            ClusterEvent::new(EventResource::CSINode, ActionType::UPDATE),
            ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
            ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ADD),
            ClusterEvent::new(EventResource::VolumeAttachment, ActionType::DELETE),
        ]
    );
    assert!(events[0].hint.is_none());
}

fn obj<K: Send + Sync + 'static>(k: K) -> EventObject {
    EventObject::object(Arc::new(k))
}

#[test]
fn hint_tables() {
    let cluster = Cluster::new(&[EBS]);
    let plugin =
        NodeVolumeLimits::new(&Handle::builder().objects(Arc::new(cluster.objects)).build())
            .expect("built");
    let events = plugin.events_to_register();
    let ebs0 = format!("{EBS}-0");
    let pod = PodBuilder::new("p").pvc(&ebs0).info();

    let csi_hint = events[1].hint.as_ref().expect("hint");
    let limit = |n: Option<i32>| obj(csi_node(NODE, &[(EBS, n)]));
    for (old, new, want) in [
        (Some(1), Some(2), QueueingHint::Queue),
        (Some(2), Some(1), QueueingHint::Skip),
        (Some(2), Some(2), QueueingHint::Skip),
        (Some(1), None, QueueingHint::Queue),
        (None, Some(1), QueueingHint::Skip),
    ] {
        assert_eq!(
            csi_hint(&pod, Some(&limit(old)), Some(&limit(new))),
            Ok(want),
            "{old:?} -> {new:?}"
        );
    }

    let pod_hint = events[2].hint.as_ref().expect("hint");
    for (name, deleted, want) in [
        (
            "bound with a claim",
            claims("d", &["x"]).node(NODE),
            QueueingHint::Queue,
        ),
        ("never bound", claims("d", &["x"]), QueueingHint::Skip),
        (
            "bound without volumes",
            PodBuilder::new("d").node(NODE),
            QueueingHint::Skip,
        ),
        (
            "bound with an inline EBS volume",
            PodBuilder::new("d")
                .volume(ebs_inline("v", "vol-1"))
                .node(NODE),
            QueueingHint::Queue,
        ),
    ] {
        let old = EventObject::Pod(deleted.info());
        assert_eq!(pod_hint(&pod, Some(&old), None), Ok(want), "{name}");
    }

    let pvc_hint = events[3].hint.as_ref().expect("hint");
    let eph_pod = PodBuilder::new("abc").ephemeral_volume("scratch").info();
    for (name, target, claim, want) in [
        (
            "the pod's claim",
            &pod,
            PvcBuilder::new(&ebs0),
            QueueingHint::Queue,
        ),
        (
            "another claim",
            &pod,
            PvcBuilder::new("other"),
            QueueingHint::Skip,
        ),
        (
            "another namespace",
            &pod,
            PvcBuilder::new(&ebs0).namespace("ns2"),
            QueueingHint::Skip,
        ),
        (
            "an ephemeral volume's claim",
            &eph_pod,
            PvcBuilder::new("abc-scratch"),
            QueueingHint::Queue,
        ),
    ] {
        assert_eq!(
            pvc_hint(target, None, Some(&obj(claim.build()))),
            Ok(want),
            "{name}"
        );
    }

    let va_hint = events[4].hint.as_ref().expect("hint");
    let inline_pod = PodBuilder::new("i").volume(ebs_inline("v", "vol-1")).info();
    let gce_pod = PodBuilder::new("g")
        .volume(volume("v", |v| {
            v.gce_persistent_disk = Some(api::GCEPersistentDiskVolumeSource {
                pd_name: "pd".into(),
                ..Default::default()
            })
        }))
        .info();
    for (name, target, va, want) in [
        (
            "the volume of the pod's claim",
            &pod,
            volume_attachment("va", NODE, EBS, &ebs0),
            QueueingHint::Queue,
        ),
        (
            "another volume",
            &pod,
            volume_attachment("va", NODE, "other.csi", "pv-x"),
            QueueingHint::Skip,
        ),
        (
            "the driver of an inline volume",
            &inline_pod,
            volume_attachment("va", NODE, EBS, "pv-x"),
            QueueingHint::Queue,
        ),
        (
            "another driver than the inline volume's",
            &gce_pod,
            volume_attachment("va", NODE, EBS, "pv-x"),
            QueueingHint::Skip,
        ),
    ] {
        assert_eq!(va_hint(target, Some(&obj(va)), None), Ok(want), "{name}");
    }
}

#[test]
fn registered_with_its_points() {
    let desc = registry::find(NAME).expect("registered");
    let plugin = NodeVolumeLimits::new(&Handle::default()).expect("built");
    assert_eq!(
        desc.extension_points().to_vec(),
        kubesched_framework::implemented_points(&plugin).as_slice()
    );
}

#[test]
fn snapshot() {
    let ebs = |i: usize| format!("{EBS}-{i}");
    let cluster = Cluster::new(&[EBS, PD]);
    for (node, limit) in [("roomy", 8), ("full", 2), ("attached", 2)] {
        cluster
            .objects
            .csi_nodes
            .upsert(csi_node(node, &[(EBS, Some(limit)), (PD, Some(limit))]));
    }
    for i in 2..4 {
        cluster.objects.volume_attachments.upsert(volume_attachment(
            &format!("va-{i}"),
            "attached",
            EBS,
            &ebs(i),
        ));
    }
    let running = |node: &str| claims("r", &[&ebs(0), &ebs(1)]).node(node).info();
    let nodes = [
        node_info(NodeBuilder::new("roomy"), &[running("roomy")]),
        node_info(NodeBuilder::new("full"), &[running("full")]),
        node_info(NodeBuilder::new("attached"), &[]),
        node_info(NodeBuilder::new("no-csinode"), &[running("no-csinode")]),
    ];
    let h = cluster.harness();
    insta::assert_yaml_snapshot!([
        h.run(&claims("new", &[&ebs(2)]).info(), &nodes),
        h.run(&claims("shared", &[&ebs(0)]).info(), &nodes),
        h.run(&claims("pd", &[&format!("{PD}-0")]).info(), &nodes),
        h.run(&PodBuilder::new("plain").info(), &nodes),
    ]);
}

/// One random change to the storage objects Filter reads: claims bound, unbound, re-bound
/// or removed, volumes re-pointed at other handles or drivers (in-tree among them), classes,
/// CSINodes (limits changed, removed) and attachments coming and going.
fn churn_storage(c: &mut Churn, objects: &ObjectStore, nodes: &[Arc<NodeInfo>]) {
    let i = c.below(8);
    match c.below(6) {
        0 => {
            let pv = PvBuilder::new(&format!("v{i}"));
            let handle = format!("h{}", c.below(6));
            let pv = match c.below(3) {
                0 => pv.csi(EBS, &handle),
                1 => pv.csi(PD, &handle),
                _ => pv.aws_ebs(&format!("vol-{}", c.below(6))),
            };
            objects.persistent_volumes.upsert(pv.build());
        }
        1 => {
            let name = format!("c{i}");
            let pvc = match c.below(4) {
                0 => PvcBuilder::new(&name).storage_class("gp2"),
                1 => PvcBuilder::new(&name).storage_class("ebs"),
                _ => PvcBuilder::new(&name).bound_to(&format!("v{}", c.below(9))),
            };
            objects.persistent_volume_claims.upsert(pvc.build());
        }
        2 => {
            objects
                .persistent_volume_claims
                .remove(Some("default"), &format!("c{i}"));
        }
        3 => {
            let (class, provisioner) = if c.below(2) == 0 {
                ("gp2", "kubernetes.io/aws-ebs")
            } else {
                ("ebs", EBS)
            };
            if c.below(3) == 0 {
                objects.storage_classes.remove(None, class);
            } else {
                objects
                    .storage_classes
                    .upsert(storage_class(class, provisioner, Some(true)));
            }
        }
        4 => {
            let Some(node) = nodes.get(c.below(nodes.len())) else {
                return;
            };
            if c.below(4) == 0 {
                objects.csi_nodes.remove(None, node.name());
            } else {
                let limit = |c: &mut Churn| match c.below(5) {
                    4 => None,
                    n => Some(n as i32),
                };
                let drivers = [(EBS, limit(c)), (PD, limit(c))];
                objects.csi_nodes.upsert(csi_node(node.name(), &drivers));
            }
        }
        _ => {
            let name = format!("va-{i}");
            match nodes.get(c.below(nodes.len())) {
                Some(node) if c.below(3) != 0 => {
                    let attacher = if c.below(2) == 0 { EBS } else { PD };
                    objects.volume_attachments.upsert(volume_attachment(
                        &name,
                        node.name(),
                        attacher,
                        &format!("v{}", c.below(9)),
                    ));
                }
                _ => {
                    objects.volume_attachments.remove(None, &name);
                }
            }
        }
    }
}

/// A pod with a few of the churned claims, sometimes an inline EBS volume, a generic
/// ephemeral volume, or a claim without a name (an error when counted).
fn churn_pod(c: &mut Churn, name: &str) -> PodBuilder {
    let mut pod = PodBuilder::new(name).uid(&format!("uid-{name}"));
    for _ in 0..c.below(4) {
        pod = pod.pvc(&format!("c{}", c.below(9)));
    }
    match c.below(12) {
        0 | 1 => pod.volume(ebs_inline("inline", &format!("vol-{}", c.below(6)))),
        2 => pod.ephemeral_volume("scratch"),
        3 => pod.pvc(""),
        _ => pod,
    }
}

/// Filter keeps each node's count from one cycle to the next. Under a long run of random
/// changes to nodes, their pods and the storage objects, one long-lived plugin must answer
/// exactly as a plugin built fresh for each cycle.
#[test]
fn kept_counts_answer_as_a_fresh_plugin_would() {
    let objects = Arc::new(ObjectStore::default());
    let harness = || {
        let handle = Handle::builder().objects(Arc::clone(&objects));
        PluginHarness::from_registry(NAME, None, handle).expect("registered")
    };
    let kept = harness();
    let mut churn = Churn::new(11, &["z1"]);
    let mut nodes: Vec<Arc<NodeInfo>> = (0..12).map(|_| churn.node()).collect();
    let mut make_pod = |c: &mut Churn, node: &str| {
        let name = c.name("pod");
        churn_pod(c, &name).node(node)
    };
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for step in 0..600 {
        // Several changes at times, so a node may get a pod and lose another in between.
        for _ in 0..1 + churn.below(3) {
            if churn.below(2) == 0 {
                churn.step(&mut nodes, &mut make_pod);
            } else {
                churn_storage(&mut churn, &objects, &nodes);
            }
        }
        let name = churn.name("incoming");
        let pod = churn_pod(&mut churn, &name).info();
        let answer = kept.run_as_is(&pod, &nodes);
        assert_eq!(answer, harness().run_as_is(&pod, &nodes), "step {step}");
        for s in answer.nodes.iter().filter_map(|n| n.filter.as_ref()) {
            *codes.entry(s.code.clone()).or_default() += 1;
        }
    }
    // The churn reaches the interesting cases, not only "fits".
    let seen = |code: &str| codes.get(code).copied().unwrap_or(0);
    assert!(
        seen("Unschedulable") >= 100 && seen("Error") >= 100 && seen("Success") >= 1000,
        "{codes:?}"
    );
}

/// A CSIDriver named `name`, opting in to `preventPodSchedulingIfMissing` or not.
fn csi_driver_object(
    name: &str,
    prevent: Option<bool>,
) -> kubesched_framework::model::k8s_openapi::api::storage::v1::CSIDriver {
    use kubesched_framework::model::k8s_openapi::api::storage::v1 as storage;
    storage::CSIDriver {
        metadata:
            kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
        spec: storage::CSIDriverSpec {
            prevent_pod_scheduling_if_missing: prevent,
            ..Default::default()
        },
    }
}

#[test]
fn a_driver_that_opts_in_must_be_on_the_node() {
    // VolumeLimitScaling (beta and on in v1.37, #135012 / #137343): a CSIDriver with
    // `preventPodSchedulingIfMissing: true` keeps pods using its volumes off nodes whose
    // CSINode does not list it (or that have no CSINode). v1.34 let them in (no limit is
    // known there); so does v1.37 for drivers that do not opt in.
    let ebs0 = format!("{EBS}-0");
    let missing = format!("Unschedulable: {}", err_reason_driver_missing(EBS));
    assert_eq!(
        missing,
        "Unschedulable: ebs.csi.aws.com CSI driver is not installed on the node"
    );
    let cluster = |prevent: Option<bool>, csi_node_drivers: Option<&[(&str, Option<i32>)]>| {
        let c = Cluster::new(&[EBS]);
        if let Some(p) = prevent {
            c.objects
                .csi_drivers
                .upsert(csi_driver_object(EBS, Some(p)));
        }
        match csi_node_drivers {
            Some(drivers) => c.limits(drivers),
            None => c,
        }
    };
    let rows: Vec<(&str, Cluster, &str)> = vec![
        (
            "opted in, the node's CSINode lists another driver",
            cluster(Some(true), Some(&[(PD, Some(10))])),
            &missing,
        ),
        (
            "opted in, no CSINode at all",
            cluster(Some(true), None),
            &missing,
        ),
        (
            "opted in, the driver is registered without a limit",
            cluster(Some(true), Some(&[(EBS, None)])),
            FITS,
        ),
        (
            "opted in, registered with room",
            cluster(Some(true), Some(&[(EBS, Some(3))])),
            FITS,
        ),
        (
            "not opted in (false)",
            cluster(Some(false), Some(&[(PD, Some(10))])),
            FITS,
        ),
        ("no CSIDriver object", cluster(None, None), FITS),
    ];
    for (name, c, want) in rows {
        assert_eq!(verdict(c, claims("p", &[&ebs0]), vec![]), want, "{name}");
    }
    // With the gate off (v1.36's default, alpha) the opt-in has no effect.
    let c = cluster(Some(true), Some(&[(PD, Some(10))]));
    let handle = Handle::builder().objects(Arc::new(c.objects)).features(
        kubesched_framework::FeatureGates::defaults_at(kubesched_framework::Version::V1_36),
    );
    let harness = PluginHarness::from_registry(NAME, None, handle).expect("registered");
    let run = harness.run(
        &claims("p", &[&ebs0]).info(),
        &[node_info(NodeBuilder::new(NODE), &[])],
    );
    assert_eq!(
        run.nodes[0].filter.as_ref().map(|s| s.code.as_str()),
        Some("Success")
    );
    // A CSINode that registers a new driver requeues such pods (with the gate).
    let before = csi_node(NODE, &[(PD, Some(10))]);
    let after = csi_node(NODE, &[(PD, Some(10)), (EBS, None)]);
    assert_eq!(
        csi_node_updated_may_help(&before, &after, true),
        QueueingHint::Queue
    );
    assert_eq!(
        csi_node_updated_may_help(&before, &after, false),
        QueueingHint::Skip
    );
}
