use super::*;
use kubesched_framework::events::ClusterEvent;
use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::model::storage::BETA_STORAGE_CLASS_ANNOTATION;
use kubesched_framework::{ObjectStore, registry};
use kubesched_testing::{
    NodeBuilder, PluginHarness, PodBuilder, PvBuilder, PvcBuilder, node_info, storage_class,
};

/// Claims `claim-<pv>` bound to each volume, plus the given extra claims and classes.
fn harness(
    pvs: &[api::PersistentVolume],
    claims: &[api::PersistentVolumeClaim],
    classes: &[StorageClass],
) -> PluginHarness {
    let objects = ObjectStore::default();
    for pv in pvs {
        let name = pv.metadata.name.clone().expect("named");
        objects.persistent_volume_claims.upsert(
            PvcBuilder::new(&format!("claim-{name}"))
                .bound_to(&name)
                .build(),
        );
        objects.persistent_volumes.upsert(pv.clone());
    }
    for c in claims {
        objects.persistent_volume_claims.upsert(c.clone());
    }
    for c in classes {
        objects.storage_classes.upsert(c.clone());
    }
    let handle = Handle::builder().objects(Arc::new(objects));
    PluginHarness::from_registry(NAME, None, handle).expect("registered")
}

fn zonal_pvs() -> Vec<api::PersistentVolume> {
    vec![
        PvBuilder::new("pv-a").label(LABEL_ZONE, "zone-a").build(),
        PvBuilder::new("pv-beta-a")
            .label(LABEL_BETA_ZONE, "zone-a")
            .build(),
        PvBuilder::new("pv-ab")
            .label(LABEL_ZONE, "zone-a__zone-b")
            .build(),
        PvBuilder::new("pv-region")
            .label(LABEL_REGION, "r1")
            .build(),
        PvBuilder::new("pv-a-r1")
            .label(LABEL_ZONE, "zone-a")
            .label(LABEL_REGION, "r1")
            .build(),
        PvBuilder::new("pv-malformed")
            .label(LABEL_ZONE, "zone-a__")
            .build(),
        PvBuilder::new("pv-none").build(),
    ]
}

fn check(name: &str, pv: &str, node: NodeBuilder, fits: bool) {
    let h = harness(&zonal_pvs(), &[], &[]);
    let pod = PodBuilder::new("p").pvc(&format!("claim-{pv}")).info();
    let run = h.run(&pod, &[node_info(node, &[])]);
    let pre = run.pre_filter.clone().expect("ran");
    let status = match run.nodes[0].filter.clone() {
        Some(s) => s,
        None => {
            assert_eq!(pre.code, "Skip", "{name}");
            assert!(fits, "{name}: skipped but expected a rejection");
            return;
        }
    };
    if fits {
        assert_eq!(status.code, "Success", "{name}");
    } else {
        assert_eq!(status.code, "UnschedulableAndUnresolvable", "{name}");
        assert_eq!(
            status.reasons,
            vec![ERR_REASON_CONFLICT.to_string()],
            "{name}"
        );
    }
}

#[test]
fn filter_table() {
    let node = |zone: &str| NodeBuilder::new("n").label(LABEL_ZONE, zone);
    check("same zone", "pv-a", node("zone-a"), true);
    check("other zone", "pv-a", node("zone-b"), false);
    check(
        "beta label on the volume, GA on the node",
        "pv-beta-a",
        node("zone-a"),
        true,
    );
    check("beta label, other zone", "pv-beta-a", node("zone-b"), false);
    check(
        "beta label on both",
        "pv-beta-a",
        NodeBuilder::new("n").label(LABEL_BETA_ZONE, "zone-a"),
        true,
    );
    check(
        "GA label on the volume, only beta on the node",
        "pv-a",
        NodeBuilder::new("n").label(LABEL_BETA_ZONE, "zone-a"),
        false,
    );
    check("one of several zones", "pv-ab", node("zone-b"), true);
    check("none of several zones", "pv-ab", node("zone-c"), false);
    check(
        "node without topology labels",
        "pv-a",
        NodeBuilder::new("n"),
        true,
    );
    check(
        "node with only other labels",
        "pv-a",
        NodeBuilder::new("n").label("disk", "ssd"),
        true,
    );
    check(
        "region matches",
        "pv-region",
        node("zone-x").label(LABEL_REGION, "r1"),
        true,
    );
    check(
        "region label missing on a zoned node",
        "pv-region",
        node("zone-x"),
        false,
    );
    check(
        "zone matches, region does not",
        "pv-a-r1",
        node("zone-a").label(LABEL_REGION, "r2"),
        false,
    );
    check(
        "a malformed label is ignored",
        "pv-malformed",
        node("zone-z"),
        true,
    );
    check("a volume without labels", "pv-none", node("zone-a"), true);
}

#[test]
fn unbound_claims() {
    let wffc = storage_class("late", "csi.example.com", Some(true));
    let immediate = storage_class("now", "csi.example.com", Some(false));
    let claims = [
        PvcBuilder::new("late").storage_class("late").build(),
        PvcBuilder::new("now").storage_class("now").build(),
        PvcBuilder::new("classless").build(),
        PvcBuilder::new("ghost-class")
            .storage_class("ghost")
            .build(),
        PvcBuilder::new("annotated")
            .with(|c| {
                c.metadata.annotations = Some(
                    [(
                        BETA_STORAGE_CLASS_ANNOTATION.to_string(),
                        "late".to_string(),
                    )]
                    .into(),
                );
            })
            .build(),
        PvcBuilder::new("lost-volume").bound_to("gone").build(),
    ];
    let h = harness(&zonal_pvs(), &claims, &[wffc, immediate]);
    let node = node_info(NodeBuilder::new("n").label(LABEL_ZONE, "zone-b"), &[]);
    let cases = [
        ("late", "Skip", None),
        ("annotated", "Skip", None),
        (
            "now",
            "UnschedulableAndUnresolvable",
            Some("PersistentVolume had no name"),
        ),
        (
            "classless",
            "UnschedulableAndUnresolvable",
            Some("PersistentVolumeClaim had no pv name and storageClass name"),
        ),
        (
            "ghost-class",
            "UnschedulableAndUnresolvable",
            Some("storageclass.storage.k8s.io \"ghost\" not found"),
        ),
        (
            "lost-volume",
            "UnschedulableAndUnresolvable",
            Some("persistentvolume \"gone\" not found"),
        ),
        (
            "missing",
            "UnschedulableAndUnresolvable",
            Some("persistentvolumeclaim \"missing\" not found"),
        ),
    ];
    for (claim, code, reason) in cases {
        let run = h.run(
            &PodBuilder::new("p").pvc(claim).info(),
            std::slice::from_ref(&node),
        );
        let status = run.pre_filter.expect("ran");
        assert_eq!(status.code, code, "{claim}");
        assert_eq!(
            status.reasons,
            reason.map(str::to_string).into_iter().collect::<Vec<_>>(),
            "{claim}"
        );
    }
    // A delayed claim beside a zonal one: the zonal one still decides.
    let run = h.run(
        &PodBuilder::new("p").pvc("late").pvc("claim-pv-a").info(),
        std::slice::from_ref(&node),
    );
    assert_eq!(
        run.filter_of("n").expect("ran").code,
        "UnschedulableAndUnresolvable"
    );
}

#[test]
fn pods_without_claims_skip() {
    let h = harness(&zonal_pvs(), &[], &[]);
    let node = node_info(NodeBuilder::new("n").label(LABEL_ZONE, "zone-b"), &[]);
    let run = h.run(&PodBuilder::new("plain").info(), &[node]);
    assert_eq!(run.pre_filter.expect("ran").code, "Skip");
}

#[test]
fn filter_without_pre_filter_computes_the_topology() {
    let h = harness(&zonal_pvs(), &[], &[]);
    let plugin = VolumeZone::new(h.handle()).expect("built");
    let pod = PodBuilder::new("p").pvc("claim-pv-a").info();
    let state = CycleState::new();
    let b = node_info(NodeBuilder::new("b").label(LABEL_ZONE, "zone-b"), &[]);
    let a = node_info(NodeBuilder::new("a").label(LABEL_ZONE, "zone-a"), &[]);
    assert!(plugin.filter(&state, &pod, &b).is_rejected());
    assert!(plugin.filter(&state, &pod, &a).is_success());
    let missing = PodBuilder::new("p").pvc("nope").info();
    assert_eq!(
        plugin.filter(&state, &missing, &a).reasons(),
        ["persistentvolumeclaim \"nope\" not found"]
    );
}

#[test]
fn registers_class_node_claim_and_volume_events() {
    let plugin = VolumeZone::new(&Handle::default()).expect("built");
    let kinds: Vec<ClusterEvent> = plugin
        .events_to_register()
        .iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        kinds,
        vec![
            ClusterEvent::new(EventResource::StorageClass, ActionType::ADD),
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_LABEL)
            ),
            ClusterEvent::new(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD.union(ActionType::UPDATE)
            ),
            ClusterEvent::new(
                EventResource::PersistentVolume,
                ActionType::ADD.union(ActionType::UPDATE)
            ),
        ]
    );
}

fn obj<K: Send + Sync + 'static>(k: K) -> EventObject {
    EventObject::object(Arc::new(k))
}

#[test]
fn hint_tables() {
    let plugin = VolumeZone::new(&Handle::default()).expect("built");
    let events = plugin.events_to_register();
    let pod = PodBuilder::new("p").pvc("data").info();

    let class_hint = events[0].hint.as_ref().expect("hint");
    for (wffc, want) in [
        (Some(true), QueueingHint::Queue),
        (Some(false), QueueingHint::Skip),
        (None, QueueingHint::Skip),
    ] {
        let class = obj(storage_class("c", "p", wffc));
        assert_eq!(class_hint(&pod, None, Some(&class)), Ok(want), "{wffc:?}");
    }

    let claim_hint = events[2].hint.as_ref().expect("hint");
    for (claim, want) in [
        (PvcBuilder::new("data").build(), QueueingHint::Queue),
        (
            PvcBuilder::new("data").bound_to("pv").build(),
            QueueingHint::Queue,
        ),
        (PvcBuilder::new("other").build(), QueueingHint::Skip),
        (
            PvcBuilder::new("data").namespace("ns2").build(),
            QueueingHint::Skip,
        ),
    ] {
        let name = format!("{:?}", claim.metadata);
        assert_eq!(
            claim_hint(&pod, None, Some(&obj(claim))),
            Ok(want),
            "{name}"
        );
    }
    assert!(claim_hint(&pod, None, None).is_err());

    let pv_hint = events[3].hint.as_ref().expect("hint");
    let zoned = |z: &str| PvBuilder::new("pv").label(LABEL_ZONE, z).build();
    let relabelled = PvBuilder::new("pv")
        .label(LABEL_ZONE, "zone-a")
        .label("team", "x")
        .build();
    let cases = [
        ("new volume", None, zoned("zone-a"), QueueingHint::Queue),
        (
            "zone changed",
            Some(zoned("zone-a")),
            zoned("zone-b"),
            QueueingHint::Queue,
        ),
        (
            "other labels changed",
            Some(zoned("zone-a")),
            relabelled,
            QueueingHint::Skip,
        ),
        (
            "zone label removed",
            Some(zoned("zone-a")),
            PvBuilder::new("pv").build(),
            QueueingHint::Queue,
        ),
    ];
    for (name, old, new, want) in cases {
        let old = old.map(obj);
        assert_eq!(
            pv_hint(&pod, old.as_ref(), Some(&obj(new))),
            Ok(want),
            "{name}"
        );
    }
}

#[test]
fn registered_with_its_points() {
    let desc = registry::find(NAME).expect("registered");
    let plugin = VolumeZone::new(&Handle::default()).expect("built");
    assert_eq!(
        desc.extension_points().to_vec(),
        kubesched_framework::implemented_points(&plugin).as_slice()
    );
}

#[test]
fn snapshot() {
    let h = harness(
        &zonal_pvs(),
        &[PvcBuilder::new("late").storage_class("late").build()],
        &[storage_class("late", "csi.example.com", Some(true))],
    );
    let nodes = [
        node_info(NodeBuilder::new("a").label(LABEL_ZONE, "zone-a"), &[]),
        node_info(NodeBuilder::new("b").label(LABEL_ZONE, "zone-b"), &[]),
        node_info(
            NodeBuilder::new("beta-a").label(LABEL_BETA_ZONE, "zone-a"),
            &[],
        ),
        node_info(NodeBuilder::new("unlabelled"), &[]),
    ];
    insta::assert_yaml_snapshot!([
        h.run(&PodBuilder::new("zonal").pvc("claim-pv-a").info(), &nodes),
        h.run(
            &PodBuilder::new("beta").pvc("claim-pv-beta-a").info(),
            &nodes
        ),
        h.run(&PodBuilder::new("multi").pvc("claim-pv-ab").info(), &nodes),
        h.run(&PodBuilder::new("late").pvc("late").info(), &nodes),
    ]);
}
