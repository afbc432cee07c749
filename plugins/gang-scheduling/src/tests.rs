//! Table tests of PreEnqueue, PlacementFeasible and the queueing hints, on a handle whose
//! PodGroup store and live pods the test controls.

use std::sync::Arc;

use k8s_openapi::api::scheduling::v1beta1::{
    BasicSchedulingPolicy, GangSchedulingPolicy, PodGroupSchedulingPolicy, PodGroupSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubesched_framework::registry;
use kubesched_framework::workload::{SchedulingPolicy, pod_group_name};
use kubesched_framework::{LivePods, ObjectStore, WaitingPods};
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

/// The UIDs the plugin asked the queue to activate, in order.
#[derive(Default)]
struct Activated(Mutex<Vec<String>>);

impl kubesched_framework::PodActivator for Activated {
    fn activate(&self, uids: &[String]) {
        self.0.lock().expect("activated").extend_from_slice(uids);
    }
}

struct Fixture {
    plugin: GangScheduling,
    groups: Arc<Store<PodGroup>>,
    pods: Arc<Pods>,
    waiting: Arc<WaitingPods>,
    activated: Arc<Activated>,
}

fn fixture() -> Fixture {
    let pods = Arc::new(Pods::default());
    let objects = Arc::new(ObjectStore::default());
    let waiting = Arc::new(WaitingPods::default());
    let activated = Arc::new(Activated::default());
    let control = Handle::builder()
        .live_pods(pods.clone())
        .objects(objects.clone())
        .waiting_pods(waiting.clone())
        .build_with_control();
    control.set_activator(activated.clone());
    let plugin = GangScheduling::new(control.handle()).expect("plugin");
    Fixture {
        plugin,
        groups: objects.of::<PodGroup>(),
        pods,
        waiting,
        activated,
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
        scheduled: Vec::new(),
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
    // v1.37 queues the pod on an update whose policy is not a gang on either side.
    let basic = EventObject::object(Arc::new(pod_group("g", true, None)));
    assert_eq!(
        hint(3, Some(basic.clone()), Some(pg("g", 3))),
        Ok(QueueingHint::Queue)
    );
    assert_eq!(
        hint(3, Some(pg("g", 3)), Some(basic.clone())),
        Ok(QueueingHint::Queue)
    );
    assert_eq!(
        hint(3, Some(basic.clone()), Some(basic)),
        Ok(QueueingHint::Queue)
    );
    // Another group's update is still skipped.
    let other_basic = EventObject::object(Arc::new(pod_group("h", true, None)));
    assert_eq!(
        hint(3, Some(other_basic.clone()), Some(other_basic)),
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
    assert!(f.plugin.as_permit().is_some(), "v1.37 keeps Permit");
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

/// A CycleState as the pod-group cycle hands it to Permit: `scheduled` members counted.
fn counted(scheduled: usize) -> CycleState {
    let mut state = CycleState::new();
    state.write(PodGroupScheduledCount(scheduled));
    state
}

/// A Permit table row: name, PodGroup, members scheduled as the group cycle counts them
/// (None: no count, the pod came another way), expected code and reason.
type PermitRow = (
    &'static str,
    Option<PodGroup>,
    Option<usize>,
    Code,
    Option<String>,
);

#[test]
fn permit_table() {
    let rows: [PermitRow; 6] = [
        (
            "group gone",
            None,
            Some(3),
            Code::Error,
            Some(pod_group_lookup_failed("default", "g")),
        ),
        (
            "basic policy",
            Some(pod_group("g", true, None)),
            Some(1),
            Code::Success,
            None,
        ),
        (
            "gang short of minCount",
            Some(pod_group("g", false, Some(3))),
            Some(2),
            Code::Wait,
            Some(WAITING_FOR_MIN_COUNT_SCHEDULED.into()),
        ),
        (
            "gang at minCount",
            Some(pod_group("g", false, Some(3))),
            Some(3),
            Code::Success,
            None,
        ),
        (
            "gang above minCount",
            Some(pod_group("g", false, Some(3))),
            Some(5),
            Code::Success,
            None,
        ),
        // Outside a group cycle only this pod is scheduled (nothing bound, nothing waiting).
        (
            "gang, no count from a group cycle",
            Some(pod_group("g", false, Some(2))),
            None,
            Code::Wait,
            Some(WAITING_FOR_MIN_COUNT_SCHEDULED.into()),
        ),
    ];
    for (name, group, scheduled, code, reason) in rows {
        let f = fixture();
        if let Some(g) = group {
            f.groups.upsert(g);
        }
        let state = scheduled.map(counted).unwrap_or_default();
        let (status, wait) = f.plugin.permit(&state, &member("g-0", "g"), "node-1");
        assert_eq!(status.code(), code, "{name}: {status:?}");
        match reason {
            Some(r) => assert_eq!(status.reasons(), [r], "{name}"),
            None => assert!(status.reasons().is_empty(), "{name}"),
        }
        let want = if code == Code::Wait {
            PERMIT_TIMEOUT
        } else {
            Duration::ZERO
        };
        assert_eq!(wait, want, "{name}");
    }
    // A pod of no group is none of the plugin's business.
    let f = fixture();
    let (status, _) = f.plugin.permit(
        &CycleState::new(),
        &PodBuilder::new("solo").info(),
        "node-1",
    );
    assert!(status.is_success());
}

#[test]
fn permit_holds_a_gang_until_min_count_then_lets_all_go() {
    let f = fixture();
    f.groups.upsert(pod_group("g", false, Some(3)));
    f.add_pods("g", 4);
    let pods: Vec<Arc<PodInfo>> = f.pods.0.lock().expect("pods").clone();
    // The first two members wait, as the framework registers a pod whose Permit said Wait;
    // each asks the queue for the members not scheduled yet.
    for (i, pod) in pods.iter().take(2).enumerate() {
        let (status, _) = f.plugin.permit(&counted(i + 1), pod, "node-1");
        assert_eq!(status.code(), Code::Wait, "member {i}");
        f.waiting
            .add(pod.clone(), [(NAME.to_string(), PERMIT_TIMEOUT)].into());
    }
    assert_eq!(
        *f.activated.0.lock().expect("activated"),
        ["g-1", "g-2", "g-3", "g-2", "g-3"]
    );
    // The third reaches minCount: it goes on and so do the two waiting.
    let (status, _) = f.plugin.permit(&counted(3), &pods[2], "node-1");
    assert!(status.is_success(), "{status:?}");
    for pod in &pods[..2] {
        let waiting = f.waiting.get(&pod.uid).expect("still registered");
        assert!(!waiting.is_waiting(), "{} allowed", pod.name);
    }
}

#[test]
fn permit_outside_a_group_cycle_counts_bound_and_waiting_members() {
    let f = fixture();
    f.groups.upsert(pod_group("g", false, Some(3)));
    {
        let mut pods = f.pods.0.lock().expect("pods");
        pods.push(
            PodBuilder::new("g-bound")
                .pod_group("g")
                .node("node-2")
                .info(),
        );
        pods.push(member("g-waiting", "g"));
        pods.push(member("g-pending", "g"));
    }
    let (status, _) = f
        .plugin
        .permit(&CycleState::new(), &member("g-late", "g"), "node-1");
    assert_eq!(status.code(), Code::Wait, "one bound and this pod: 2 of 3");
    f.waiting.add(
        member("g-waiting", "g"),
        [(NAME.to_string(), PERMIT_TIMEOUT)].into(),
    );
    let (status, _) = f
        .plugin
        .permit(&CycleState::new(), &member("g-late", "g"), "node-1");
    assert!(
        status.is_success(),
        "bound, waiting and this pod: {status:?}"
    );
    assert!(!f.waiting.get("g-waiting").expect("registered").is_waiting());
}

#[test]
fn permit_words() {
    assert_eq!(
        pod_group_lookup_failed("ml", "train"),
        r#"failed to get podGroup ml/train: podgroup.scheduling.k8s.io "train" not found"#
    );
    assert_eq!(
        WAITING_FOR_MIN_COUNT_SCHEDULED,
        "waiting for minCount pods from a gang to be scheduled"
    );
    assert_eq!(PERMIT_TIMEOUT, Duration::from_secs(300));
}
