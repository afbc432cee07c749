//! Table tests of PreEnqueue, PlacementFeasible and the queueing hints, on a handle whose
//! PodGroup store and live pods the test controls.

use std::sync::Arc;

use k8s_openapi::api::scheduling::v1beta1::{
    BasicSchedulingPolicy, GangSchedulingPolicy, PodGroupSchedulingPolicy, PodGroupSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubesched_framework::registry;
use kubesched_framework::workload::{SchedulingPolicy, pod_group_name};
use kubesched_framework::{LivePods, ObjectStore};
use kubesched_testing::{PodBuilder, StatusView};
use std::sync::Mutex;

use super::*;

#[derive(Default)]
struct Pods(Mutex<Vec<Arc<PodInfo>>>);

impl LivePods for Pods {
    fn with_label(&self, _: &str, _: &str, _: &str) -> Vec<Arc<PodInfo>> {
        Vec::new()
    }

    fn in_pod_group(&self, namespace: &str, group: &str) -> Vec<Arc<PodInfo>> {
        self.0
            .lock()
            .expect("pods")
            .iter()
            .filter(|p| p.namespace == namespace && pod_group_name(p) == Some(group))
            .cloned()
            .collect()
    }
}

struct Fixture {
    plugin: GangScheduling,
    groups: Arc<Store<PodGroup>>,
    pods: Arc<Pods>,
}

fn fixture() -> Fixture {
    let pods = Arc::new(Pods::default());
    let objects = Arc::new(ObjectStore::default());
    let handle = Handle::builder()
        .live_pods(pods.clone())
        .objects(objects.clone())
        .build();
    let plugin = GangScheduling::new(&handle).expect("plugin");
    Fixture {
        plugin,
        groups: objects.of::<PodGroup>(),
        pods,
    }
}

fn pod_group(name: &str, basic: bool, gang: Option<i32>) -> PodGroup {
    PodGroup {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                basic: basic.then(BasicSchedulingPolicy::default),
                gang: gang.map(|min_count| GangSchedulingPolicy { min_count }),
            },
            ..Default::default()
        },
        status: None,
    }
}

fn member(name: &str, group: &str) -> Arc<PodInfo> {
    PodBuilder::new(name).pod_group(group).info()
}

impl Fixture {
    fn add_pods(&self, group: &str, n: usize) {
        let mut pods = self.pods.0.lock().expect("pods");
        for i in 0..n {
            pods.push(member(&format!("{group}-{i}"), group));
        }
    }
}

#[test]
fn pre_enqueue_table() {
    // (name, PodGroup, members known, expected reason; None = admitted)
    let rows: [(&str, Option<PodGroup>, usize, Option<String>); 6] = [
        ("no group yet", None, 3, Some(waiting_for_pod_group("g"))),
        (
            "basic policy",
            Some(pod_group("g", true, None)),
            1,
            None,
        ),
        (
            "gang short of minCount",
            Some(pod_group("g", false, Some(3))),
            2,
            Some(WAITING_FOR_MIN_COUNT.into()),
        ),
        (
            "gang at minCount",
            Some(pod_group("g", false, Some(3))),
            3,
            None,
        ),
        (
            "gang above minCount",
            Some(pod_group("g", false, Some(3))),
            5,
            None,
        ),
        (
            "both policies",
            Some(pod_group("g", true, Some(2))),
            2,
            Some(
                "PodGroup default/g: spec.schedulingPolicy: exactly one of basic and gang may be set, both are"
                    .into(),
            ),
        ),
    ];
    for (name, group, known, want) in rows {
        let f = fixture();
        if let Some(g) = group {
            f.groups.upsert(g);
        }
        f.add_pods("g", known);
        let status = f.plugin.pre_enqueue(&member("g-0", "g"));
        match want {
            None => assert!(status.is_success(), "{name}: {status:?}"),
            Some(reason) => {
                assert_eq!(status.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(status.reasons(), [reason], "{name}");
            }
        }
    }
    // A pod of no group is none of the plugin's business.
    let f = fixture();
    assert!(
        f.plugin
            .pre_enqueue(&PodBuilder::new("solo").info())
            .is_success()
    );
}

#[test]
fn upstream_words() {
    assert_eq!(
        waiting_for_pod_group("train"),
        r#"waiting for pods's pod group "train" to appear in scheduling queue"#
    );
    assert_eq!(
        cannot_be_satisfied(4, 1, 2),
        "minCount (4) cannot be satisfied: 1 scheduled, 2 remaining"
    );
    assert_eq!(
        not_yet_satisfied(4, 1, 3),
        "minCount (4) is not yet satisfied: 1 scheduled, 3 remaining"
    );
}

#[test]
fn placement_feasible_table() {
    let f = fixture();
    let info = |policy| PodGroupInfo {
        namespace: "default".into(),
        name: "g".into(),
        pod_group: Arc::new(pod_group("g", false, Some(3))),
        policy,
        pods: Vec::new(),
    };
    let gang = info(SchedulingPolicy::Gang { min_count: 3 });
    let basic = info(SchedulingPolicy::Basic);
    // (group, scheduled, remaining, code, reason)
    let rows = [
        (&gang, 0, 3, Code::Wait, Some(not_yet_satisfied(3, 0, 3))),
        (&gang, 2, 1, Code::Wait, Some(not_yet_satisfied(3, 2, 1))),
        (
            &gang,
            1,
            1,
            Code::Unschedulable,
            Some(cannot_be_satisfied(3, 1, 1)),
        ),
        (
            &gang,
            0,
            2,
            Code::Unschedulable,
            Some(cannot_be_satisfied(3, 0, 2)),
        ),
        (&gang, 3, 0, Code::Success, None),
        (&gang, 3, 2, Code::Success, None),
        (&basic, 0, 1, Code::Wait, Some(not_yet_satisfied(1, 0, 1))),
        (
            &basic,
            0,
            0,
            Code::Unschedulable,
            Some(cannot_be_satisfied(1, 0, 0)),
        ),
        (&basic, 1, 0, Code::Success, None),
    ];
    for (group, scheduled, remaining, code, reason) in rows {
        let mut state = PlacementCycleState::new();
        let s = f.plugin.placement_feasible(
            &mut state,
            group,
            PlacementProgress {
                remaining,
                scheduled,
            },
        );
        let row = format!("{:?} {scheduled}/{remaining}", group.policy);
        assert_eq!(s.code(), code, "{row}");
        match reason {
            Some(r) => assert_eq!(s.reasons(), [r], "{row}"),
            None => assert!(s.reasons().is_empty(), "{row}"),
        }
    }
}

#[test]
fn hints_queue_only_the_same_group() {
    let f = fixture();
    let events = f.plugin.events_to_register();
    let labels: Vec<String> = events.iter().map(|e| e.event.label()).collect();
    insta::assert_yaml_snapshot!(labels);
    let pod = member("a", "g");
    let hint = |i: usize, old: Option<EventObject>, new: Option<EventObject>| {
        (events[i].hint.as_ref().expect("hint"))(&pod, old.as_ref(), new.as_ref())
    };
    let same = EventObject::Pod(member("b", "g"));
    let other = EventObject::Pod(member("c", "h"));
    let none = EventObject::Pod(PodBuilder::new("d").info());
    assert_eq!(hint(0, None, Some(same.clone())), Ok(QueueingHint::Queue));
    assert_eq!(hint(1, None, Some(same)), Ok(QueueingHint::Queue));
    assert_eq!(hint(0, None, Some(other)), Ok(QueueingHint::Skip));
    assert_eq!(hint(0, None, Some(none)), Ok(QueueingHint::Skip));
    let pg = |name: &str, min| EventObject::object(Arc::new(pod_group(name, false, Some(min))));
    assert_eq!(hint(2, None, Some(pg("g", 3))), Ok(QueueingHint::Queue));
    assert_eq!(hint(2, None, Some(pg("h", 3))), Ok(QueueingHint::Skip));
    assert_eq!(
        hint(3, Some(pg("g", 3)), Some(pg("g", 2))),
        Ok(QueueingHint::Queue)
    );
    assert_eq!(
        hint(3, Some(pg("g", 3)), Some(pg("g", 4))),
        Ok(QueueingHint::Skip)
    );
    assert_eq!(
        hint(3, Some(pg("h", 3)), Some(pg("h", 2))),
        Ok(QueueingHint::Skip)
    );
    assert!(hint(2, None, None).is_err());
}

#[test]
fn registered_with_its_points_and_kinds() {
    let f = fixture();
    let desc = registry::find(NAME).expect("registered");
    assert_eq!(
        kubesched_framework::implemented_points(&f.plugin),
        desc.extension_points().to_vec()
    );
    assert_eq!(desc.kinds.len(), 1);
    assert_eq!(desc.kinds[0].api_version(), "scheduling.k8s.io/v1beta1");
    assert_eq!(desc.kinds[0].kind, "PodGroup");
    use kubesched_framework::Plugin;
    assert!(f.plugin.as_placement_feasible().is_some());
}

#[test]
fn pre_enqueue_snapshot() {
    let f = fixture();
    f.groups.upsert(pod_group("whole", false, Some(2)));
    f.groups.upsert(pod_group("short", false, Some(4)));
    f.add_pods("whole", 2);
    f.add_pods("short", 2);
    let results: std::collections::BTreeMap<String, StatusView> = [
        member("whole-0", "whole"),
        member("short-0", "short"),
        member("lost-0", "lost"),
    ]
    .into_iter()
    .map(|p| (p.key(), StatusView::from(&f.plugin.pre_enqueue(&p))))
    .collect();
    insta::assert_yaml_snapshot!(results);
}
