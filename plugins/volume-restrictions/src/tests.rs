use super::*;
use kubesched_framework::events::ClusterEvent;
use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::{ObjectStore, registry};
use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, PvcBuilder, node_info, volume};

fn gce(name: &str, pd: &str, read_only: bool) -> api::Volume {
    volume(name, |v| {
        v.gce_persistent_disk = Some(api::GCEPersistentDiskVolumeSource {
            pd_name: pd.into(),
            read_only: Some(read_only),
            ..Default::default()
        })
    })
}

fn ebs(name: &str, id: &str) -> api::Volume {
    volume(name, |v| {
        v.aws_elastic_block_store = Some(api::AWSElasticBlockStoreVolumeSource {
            volume_id: id.into(),
            ..Default::default()
        })
    })
}

fn iscsi(name: &str, iqn: &str, read_only: bool) -> api::Volume {
    volume(name, |v| {
        v.iscsi = Some(api::ISCSIVolumeSource {
            iqn: iqn.into(),
            target_portal: "127.0.0.1:3260".into(),
            lun: 0,
            read_only: Some(read_only),
            ..Default::default()
        })
    })
}

fn rbd(name: &str, monitors: &[&str], pool: Option<&str>, image: &str, ro: bool) -> api::Volume {
    volume(name, |v| {
        v.rbd = Some(api::RBDVolumeSource {
            monitors: monitors.iter().map(|m| m.to_string()).collect(),
            pool: pool.map(str::to_string),
            image: image.into(),
            read_only: Some(ro),
            ..Default::default()
        })
    })
}

/// A plugin whose object store holds these claims, and a harness around it.
fn harness(claims: &[api::PersistentVolumeClaim]) -> PluginHarness {
    let objects = ObjectStore::default();
    for c in claims {
        objects.persistent_volume_claims.upsert(c.clone());
    }
    let handle = Handle::builder().objects(Arc::new(objects));
    PluginHarness::from_registry(NAME, None, handle).expect("registered")
}

fn pod_with(name: &str, vols: &[api::Volume]) -> PodBuilder {
    vols.iter()
        .fold(PodBuilder::new(name), |b, v| b.volume(v.clone()))
}

/// Whether a pod with `wanted` fits a node whose one pod mounts `existing`.
fn disk_fits(wanted: api::Volume, existing: api::Volume) -> bool {
    let on_node = pod_with("existing", &[existing]).node("n1").info();
    let node = node_info(NodeBuilder::new("n1"), &[on_node]);
    let run = harness(&[]).run(&pod_with("p", &[wanted]).info(), &[node]);
    let status = run.filter_of("n1").expect("filter ran");
    match status.code.as_str() {
        "Success" => true,
        "Unschedulable" => {
            assert_eq!(status.reasons, vec![ERR_REASON_DISK_CONFLICT.to_string()]);
            false
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn disk_conflict_table() {
    let cases = [
        (
            "same GCE PD read-write",
            gce("a", "pd1", false),
            gce("b", "pd1", false),
            false,
        ),
        (
            "same GCE PD, one read-only",
            gce("a", "pd1", true),
            gce("b", "pd1", false),
            false,
        ),
        (
            "same GCE PD, both read-only",
            gce("a", "pd1", true),
            gce("b", "pd1", true),
            true,
        ),
        (
            "other GCE PD",
            gce("a", "pd1", false),
            gce("b", "pd2", false),
            true,
        ),
        (
            "same EBS volume",
            ebs("a", "vol-1"),
            ebs("b", "vol-1"),
            false,
        ),
        (
            "other EBS volume",
            ebs("a", "vol-1"),
            ebs("b", "vol-2"),
            true,
        ),
        (
            "same iSCSI target",
            iscsi("a", "iqn.1", false),
            iscsi("b", "iqn.1", false),
            false,
        ),
        (
            "same iSCSI target read-only",
            iscsi("a", "iqn.1", true),
            iscsi("b", "iqn.1", true),
            true,
        ),
        (
            "other iSCSI target",
            iscsi("a", "iqn.1", false),
            iscsi("b", "iqn.2", false),
            true,
        ),
        (
            "RBD image with a shared monitor",
            rbd("a", &["m1", "m2"], Some("p"), "img", false),
            rbd("b", &["m2", "m3"], Some("p"), "img", false),
            false,
        ),
        (
            "RBD default pool is rbd",
            rbd("a", &["m1"], None, "img", false),
            rbd("b", &["m1"], Some("rbd"), "img", false),
            false,
        ),
        (
            "RBD without a shared monitor",
            rbd("a", &["m1"], Some("p"), "img", false),
            rbd("b", &["m2"], Some("p"), "img", false),
            true,
        ),
        (
            "RBD other pool",
            rbd("a", &["m1"], Some("p"), "img", false),
            rbd("b", &["m1"], Some("q"), "img", false),
            true,
        ),
        (
            "RBD read-only everywhere",
            rbd("a", &["m1"], Some("p"), "img", true),
            rbd("b", &["m1"], Some("p"), "img", true),
            true,
        ),
        (
            "different kinds never conflict",
            gce("a", "x", false),
            ebs("b", "x"),
            true,
        ),
    ];
    for (name, wanted, existing, fits) in cases {
        assert_eq!(disk_fits(wanted, existing), fits, "{name}");
    }
}

#[test]
fn pods_without_restricted_volumes_skip() {
    let h = harness(&[PvcBuilder::new("data").build()]);
    let node = node_info(NodeBuilder::new("n1"), &[]);
    let plain = h.run(
        &PodBuilder::new("plain").info(),
        std::slice::from_ref(&node),
    );
    assert_eq!(plain.pre_filter.expect("ran").code, "Skip");
    let config_map = pod_with(
        "cm",
        &[volume("cm", |v| {
            v.config_map = Some(api::ConfigMapVolumeSource::default())
        })],
    );
    let run = h.run(&config_map.info(), std::slice::from_ref(&node));
    assert_eq!(run.pre_filter.expect("ran").code, "Skip");
    // A read-write-once claim nobody uses needs no Filter either.
    let run = h.run(&PodBuilder::new("p").pvc("data").info(), &[node]);
    assert_eq!(run.pre_filter.expect("ran").code, "Skip");
}

#[test]
fn missing_claim_is_unresolvable() {
    let h = harness(&[PvcBuilder::new("other-namespace").namespace("ns2").build()]);
    let node = node_info(NodeBuilder::new("n1"), &[]);
    for claim in ["missing", "other-namespace"] {
        let run = h.run(
            &PodBuilder::new("p").pvc(claim).info(),
            std::slice::from_ref(&node),
        );
        let status = run.pre_filter.expect("ran");
        assert_eq!(status.code, "UnschedulableAndUnresolvable");
        assert_eq!(
            status.reasons,
            vec![format!("persistentvolumeclaim \"{claim}\" not found")]
        );
    }
}

fn rwop_claim(name: &str) -> api::PersistentVolumeClaim {
    rwop_claim_in("default", name)
}

fn rwop_claim_in(namespace: &str, name: &str) -> api::PersistentVolumeClaim {
    PvcBuilder::new(name)
        .namespace(namespace)
        .access_modes(&["ReadWriteOncePod"])
        .bound_to("pv-1")
        .build()
}

#[test]
fn read_write_once_pod_claim_in_use_rejects_every_node() {
    let h = harness(&[rwop_claim("solo"), PvcBuilder::new("shared").build()]);
    let holder = PodBuilder::new("holder").pvc("solo").node("n1").info();
    let nodes = [
        node_info(NodeBuilder::new("n1"), &[holder]),
        node_info(NodeBuilder::new("n2"), &[]),
    ];
    let run = h.run(
        &PodBuilder::new("p").pvc("solo").pvc("shared").info(),
        &nodes,
    );
    assert_eq!(run.pre_filter.as_ref().expect("ran").code, "Success");
    for n in ["n1", "n2"] {
        let status = run.filter_of(n).expect("filter ran");
        assert_eq!(status.code, "Unschedulable", "{n}");
        assert_eq!(
            status.reasons,
            vec![ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT.to_string()]
        );
    }
    // The same claim name in another namespace is another claim.
    let other_ns = PodBuilder::new("p").namespace("ns2").pvc("solo").info();
    let h2 = harness(&[rwop_claim_in("ns2", "solo")]);
    let run = h2.run(&other_ns, &nodes);
    assert_eq!(run.pre_filter.expect("ran").code, "Skip");
}

#[test]
fn pre_filter_extensions_track_the_claim_holders() {
    let h = harness(&[rwop_claim("solo")]);
    let holder = PodBuilder::new("holder").pvc("solo").node("n1").info();
    let node = node_info(NodeBuilder::new("n1"), std::slice::from_ref(&holder));
    h.set_nodes(std::slice::from_ref(&node));
    let plugin = VolumeRestrictions::new(h.handle()).expect("built");
    let pod = PodBuilder::new("p").pvc("solo").info();
    let mut state = CycleState::new();
    let (_, status) = plugin.pre_filter(&mut state, &pod, std::slice::from_ref(&node));
    assert!(status.is_success());
    assert!(plugin.filter(&state, &pod, &node).is_rejected());

    // Preemption removes the holder: the claim is free.
    let mut dry_run = state.clone();
    assert!(
        plugin
            .remove_pod(&mut dry_run, &pod, &holder, &node)
            .is_success()
    );
    assert!(plugin.filter(&dry_run, &pod, &node).is_success());
    // A nominated pod using the claim takes it again.
    let nominated = PodBuilder::new("nominated").pvc("solo").info();
    assert!(
        plugin
            .add_pod(&mut dry_run, &pod, &nominated, &node)
            .is_success()
    );
    assert!(plugin.filter(&dry_run, &pod, &node).is_rejected());
    // A pod of another namespace with a claim of the same name changes nothing.
    let stranger = PodBuilder::new("s").namespace("ns2").pvc("solo").info();
    plugin.remove_pod(&mut dry_run, &pod, &nominated, &node);
    plugin.add_pod(&mut dry_run, &pod, &stranger, &node);
    assert!(plugin.filter(&dry_run, &pod, &node).is_success());
    // The original state is untouched by the dry run.
    assert!(plugin.filter(&state, &pod, &node).is_rejected());
}

#[test]
fn filter_and_extensions_without_pre_filter_are_errors() {
    let plugin = VolumeRestrictions::new(&Handle::default()).expect("built");
    let pod = pod_with("p", &[ebs("a", "vol-1")]).info();
    let node = node_info(NodeBuilder::new("n1"), &[]);
    let mut state = CycleState::new();
    assert!(plugin.filter(&state, &pod, &node).is_error());
    assert!(plugin.add_pod(&mut state, &pod, &pod, &node).is_error());
    assert!(plugin.remove_pod(&mut state, &pod, &pod, &node).is_error());
}

#[test]
fn registers_pod_delete_node_add_and_claim_add() {
    let plugin = VolumeRestrictions::new(&Handle::default()).expect("built");
    let events = plugin.events_to_register();
    let kinds: Vec<ClusterEvent> = events.iter().map(|e| e.event).collect();
    assert_eq!(
        kinds,
        vec![
            ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
            ClusterEvent::new(EventResource::Node, ActionType::ADD),
            ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ADD),
        ]
    );
    assert!(events[1].hint.is_none(), "a new node always may help");
}

#[test]
fn pod_deleted_hint_table() {
    let plugin = VolumeRestrictions::new(&Handle::default()).expect("built");
    let events = plugin.events_to_register();
    let hint = events[0].hint.as_ref().expect("has a hint");
    let target = pod_with("p", &[ebs("a", "vol-1")]).pvc("solo").info();
    let cases = [
        (
            "held the same disk",
            pod_with("d", &[ebs("x", "vol-1")]),
            QueueingHint::Queue,
        ),
        (
            "held the same claim",
            PodBuilder::new("d").pvc("solo"),
            QueueingHint::Queue,
        ),
        (
            "held another disk",
            pod_with("d", &[ebs("x", "vol-2")]),
            QueueingHint::Skip,
        ),
        (
            "same disk in another namespace",
            pod_with("d", &[ebs("x", "vol-1")]).namespace("ns2"),
            QueueingHint::Skip,
        ),
        ("no volumes", PodBuilder::new("d"), QueueingHint::Skip),
    ];
    for (name, deleted, want) in cases {
        let old = EventObject::Pod(deleted.node("n1").info());
        assert_eq!(hint(&target, Some(&old), None), Ok(want), "{name}");
    }
    assert!(hint(&target, None, None).is_err());
}

#[test]
fn claim_added_hint_table() {
    let plugin = VolumeRestrictions::new(&Handle::default()).expect("built");
    let events = plugin.events_to_register();
    let hint = events[2].hint.as_ref().expect("has a hint");
    let target = PodBuilder::new("p").pvc("data").info();
    let obj = |c: api::PersistentVolumeClaim| EventObject::object(Arc::new(c));
    let cases = [
        (
            "the pod's claim",
            PvcBuilder::new("data").build(),
            QueueingHint::Queue,
        ),
        (
            "another claim",
            PvcBuilder::new("other").build(),
            QueueingHint::Skip,
        ),
        (
            "same name, other namespace",
            PvcBuilder::new("data").namespace("ns2").build(),
            QueueingHint::Skip,
        ),
    ];
    for (name, added, want) in cases {
        assert_eq!(hint(&target, None, Some(&obj(added))), Ok(want), "{name}");
    }
    assert!(
        hint(&target, None, Some(&EventObject::Other)).is_err(),
        "an event without its claim queues the pod (errors mean Queue)"
    );
}

#[test]
fn registered_with_its_points() {
    let desc = registry::find(NAME).expect("registered");
    let plugin = VolumeRestrictions::new(&Handle::default()).expect("built");
    assert_eq!(
        desc.extension_points().to_vec(),
        kubesched_framework::implemented_points(&plugin).as_slice()
    );
}

#[test]
fn snapshot() {
    let h = harness(&[
        rwop_claim("solo"),
        rwop_claim("free"),
        PvcBuilder::new("rwo").build(),
    ]);
    let nodes = [
        node_info(NodeBuilder::new("empty"), &[]),
        node_info(
            NodeBuilder::new("ebs-in-use"),
            &[pod_with("db", &[ebs("d", "vol-1")])
                .node("ebs-in-use")
                .info()],
        ),
        node_info(
            NodeBuilder::new("pd-read-only"),
            &[pod_with("reader", &[gce("d", "pd-1", true)])
                .node("pd-read-only")
                .info()],
        ),
    ];
    let disks = pod_with("disks", &[ebs("a", "vol-1"), gce("b", "pd-1", true)]).info();
    let free_claim = PodBuilder::new("free").pvc("free").pvc("rwo").info();
    let mut with_holder = nodes.to_vec();
    with_holder.push(node_info(
        NodeBuilder::new("holder"),
        &[PodBuilder::new("h").pvc("solo").node("holder").info()],
    ));
    let taken_claim = PodBuilder::new("taken").pvc("solo").info();
    let missing = PodBuilder::new("missing").pvc("nope").info();
    insta::assert_yaml_snapshot!([
        h.run(&disks, &nodes),
        h.run(&free_claim, &nodes),
        h.run(&taken_claim, &with_holder),
        h.run(&missing, &nodes),
    ]);
}
