//! Table tests of PlacementGenerate on a handle whose PodGroups and snapshot the test sets.

use std::sync::Arc;

use k8s_openapi::api::scheduling::v1beta1::{
    GangSchedulingPolicy, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy, PodGroupSpec,
    TopologyConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubesched_framework::model::PodInfo;
use kubesched_framework::workload::{SchedulingPolicy, scheduling_policy};
use kubesched_framework::{Code, ObjectStore, Snapshot, registry};
use kubesched_testing::{NodeBuilder, PodBuilder, node_infos};

use super::*;

const RACK: &str = "example.com/rack";

fn pod_group(key: Option<&str>) -> PodGroup {
    PodGroup {
        metadata: ObjectMeta {
            name: Some("train".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                gang: Some(GangSchedulingPolicy { min_count: 2 }),
                ..Default::default()
            },
            scheduling_constraints: key.map(|k| PodGroupSchedulingConstraints {
                topology: Some(vec![TopologyConstraint { key: k.into() }]),
            }),
            ..Default::default()
        },
        status: None,
    }
}

/// Nodes `a1 a2` in rack `a`, `b1` in rack `b`, `c1` in rack `c`, and `x` without the label.
fn nodes() -> Vec<Arc<NodeInfo>> {
    let n = |name: &str, rack: Option<&str>| {
        let b = NodeBuilder::new(name);
        match rack {
            Some(r) => b.label(RACK, r),
            None => b,
        }
    };
    node_infos(
        vec![
            n("b1", Some("b")),
            n("a1", Some("a")),
            n("x", None),
            n("a2", Some("a")),
            n("c1", Some("c")),
        ],
        &[],
    )
}

fn placed(name: &str, node: &str) -> Arc<PodInfo> {
    PodBuilder::new(name).pod_group("train").node(node).info()
}

/// Placements as `name: node node …`, in order; or the status's code and message.
fn generate(pg: Option<PodGroup>, scheduled: Vec<Arc<PodInfo>>) -> Result<Vec<String>, String> {
    let objects = Arc::new(ObjectStore::default());
    let nodes = nodes();
    let handle = Handle::builder()
        .objects(objects.clone())
        .snapshot(Arc::new(Snapshot::new(nodes.clone())))
        .build();
    let groups = objects.of::<PodGroup>();
    let policy = pg.as_ref().map_or(SchedulingPolicy::Basic, |p| {
        scheduling_policy(p).expect("policy")
    });
    let pod_group = Arc::new(pg.clone().unwrap_or_else(|| pod_group(None)));
    if let Some(pg) = pg {
        groups.upsert(pg);
    }
    let plugin = TopologyPlacement::new(&handle).expect("plugin");
    let info = PodGroupInfo {
        namespace: "default".into(),
        name: "train".into(),
        pod_group,
        policy,
        pods: vec![PodBuilder::new("p0").pod_group("train").info()],
        scheduled,
    };
    let parent = Placement::new("", nodes);
    plugin
        .generate_placements(&mut CycleState::new(), &info, &parent)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let names: Vec<&str> = p.nodes.iter().map(|n| n.name()).collect();
                    format!("{}: {}", p.name, names.join(" "))
                })
                .collect()
        })
        .map_err(|s| {
            assert_eq!(s.code(), Code::Error, "{s:?}");
            s.message()
        })
}

#[test]
fn placements_table() {
    type Row = (
        &'static str,
        Option<PodGroup>,
        Vec<Arc<PodInfo>>,
        Result<Vec<&'static str>, String>,
    );
    let rows: Vec<Row> = vec![
        (
            "no topology constraint: the parent placement as it is",
            Some(pod_group(None)),
            vec![],
            Ok(vec![": b1 a1 x a2 c1"]),
        ),
        (
            "one placement per rack, in name order, nodes in the parent's order; unlabelled nodes left out",
            Some(pod_group(Some(RACK))),
            vec![],
            Ok(vec!["a: a1 a2", "b: b1", "c: c1"]),
        ),
        (
            "a key no node has: no placement",
            Some(pod_group(Some("example.com/row"))),
            vec![],
            Ok(vec![]),
        ),
        (
            "members already placed pin the group to their rack",
            Some(pod_group(Some(RACK))),
            vec![placed("p1", "a2"), placed("p2", "a1")],
            Ok(vec!["a: a1 a2"]),
        ),
        (
            "placed members in two racks",
            Some(pod_group(Some(RACK))),
            vec![placed("p1", "a2"), placed("p2", "b1")],
            Err(undetermined_domain(
                "more than 1 domain found for pod group: a, b",
            )),
        ),
        (
            "a placed member on a node without the label",
            Some(pod_group(Some(RACK))),
            vec![placed("p1", "x")],
            Err(undetermined_domain(
                "no topology domain found for pod default/p1",
            )),
        ),
        (
            "a placed member on a node the snapshot lacks",
            Some(pod_group(Some(RACK))),
            vec![placed("p1", "gone")],
            Err(undetermined_domain(
                r#"getting node for pod default/p1: node "gone" not found"#,
            )),
        ),
        (
            "the PodGroup is gone",
            None,
            vec![],
            Err(pod_group_not_found("train")),
        ),
    ];
    for (name, pg, scheduled, want) in rows {
        let want = want.map(|v| v.into_iter().map(str::to_string).collect::<Vec<_>>());
        assert_eq!(generate(pg, scheduled), want, "{name}");
    }
}

#[test]
fn registered_as_a_placement_generate_plugin() {
    let desc = registry::find(NAME).expect("registered");
    assert_eq!(
        desc.extension_points().to_vec(),
        [kubesched_framework::ExtensionPoint::PlacementGenerate]
    );
    insta::assert_yaml_snapshot!(
        generate(Some(pod_group(Some(RACK))), vec![]).expect("placements")
    );
}
