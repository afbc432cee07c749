//! Table tests of every extension point, on a handle with a fake clock, a PodGroup store
//! and a list of live pods the test controls.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kubesched_framework::clock::{Clock, FakeClock};
use kubesched_framework::model::PodInfo;
use kubesched_framework::{
    Code, CycleState, Handle, HandleControl, LivePods, NodeToStatus, PermitPlugin, PodEventsPlugin,
    PostBindPlugin, PreEnqueuePlugin, PreFilterPlugin, QueueSortPlugin, QueuedPodInfo,
    ReservePlugin, Snapshot, Status, Store,
};
use kubesched_testing::{NodeBuilder, PodBuilder, node_infos};
use parking_lot::Mutex;

use super::*;

#[derive(Default)]
struct Pods(Mutex<Vec<Arc<PodInfo>>>);

impl LivePods for Pods {
    fn with_label(&self, namespace: &str, key: &str, value: &str) -> Vec<Arc<PodInfo>> {
        self.0
            .lock()
            .iter()
            .filter(|p| {
                p.namespace == namespace && p.labels.get(key).map(String::as_str) == Some(value)
            })
            .cloned()
            .collect()
    }
}

struct Fixture {
    plugin: Coscheduling,
    handle: HandleControl,
    groups: Arc<Store<PodGroup>>,
    pods: Arc<Pods>,
    clock: FakeClock,
}

fn fixture(args: CoschedulingArgs) -> Fixture {
    let clock = FakeClock::new();
    let pods = Arc::new(Pods::default());
    let handle = Handle::builder()
        .clock(Arc::new(clock.clone()))
        .live_pods(pods.clone())
        .build_with_control();
    let groups = Arc::new(Store::<PodGroup>::default());
    let plugin = Coscheduling::with_groups(&args, &handle, groups.clone()).expect("valid args");
    Fixture {
        plugin,
        handle,
        groups,
        pods,
        clock,
    }
}

fn group(name: &str, min_member: i32) -> PodGroup {
    PodGroup {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: PodGroupSpec {
            min_member,
            ..Default::default()
        },
        status: None,
    }
}

fn member(name: &str, group: &str) -> PodBuilder {
    PodBuilder::new(name)
        .uid(name)
        .label(POD_GROUP_LABEL, group)
        .container(&[("cpu", "1")])
}

impl Fixture {
    fn add_group(&self, pg: PodGroup) {
        self.groups.upsert(pg);
    }

    /// Adds pods to the live view and returns them.
    fn add_pods(&self, pods: impl IntoIterator<Item = PodBuilder>) -> Vec<Arc<PodInfo>> {
        let infos: Vec<Arc<PodInfo>> = pods.into_iter().map(PodBuilder::info).collect();
        self.pods.0.lock().extend(infos.iter().cloned());
        infos
    }

    fn gang(&self, group: &str, n: usize) -> Vec<Arc<PodInfo>> {
        self.add_pods((0..n).map(|i| member(&format!("{group}-{i}"), group)))
    }

    fn pre_filter(&self, pod: &PodInfo) -> Status {
        self.plugin.pre_filter(&mut CycleState::new(), pod, &[]).1
    }

    fn permit(&self, pod: &Arc<PodInfo>) -> (Status, Duration) {
        let (status, wait) = self.plugin.permit(&CycleState::new(), pod, "n1");
        if status.is_wait() {
            let waits = HashMap::from([(NAME.to_string(), wait)]);
            self.handle.waiting_pods().add(pod.clone(), waits);
        }
        (status, wait)
    }

    fn post_filter(&self, pod: &Arc<PodInfo>) -> Status {
        self.post_filter_after(&CycleState::new(), pod)
    }

    /// PostFilter in the cycle whose state the earlier points wrote.
    fn post_filter_after(&self, state: &CycleState, pod: &Arc<PodInfo>) -> Status {
        let fw = Framework::from_instances(
            kubesched_framework::ProfileSpec::default(),
            self.handle.clone(),
            Arc::new(kubesched_framework::metrics::NoMetrics),
            Default::default(),
            Default::default(),
        )
        .expect("an empty profile");
        let statuses = NodeToStatus::default();
        let run = self.plugin.post_filter(&fw, state, pod, &statuses);
        futures_lite(run).1
    }
}

/// Runs a future that never waits (PostFilter here) to completion.
fn futures_lite<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(f)
}

fn outcome(s: &Status) -> (Code, String) {
    (s.code(), s.message())
}

#[test]
fn pre_enqueue_holds_a_group_until_min_member_pods_exist() {
    let f = fixture(CoschedulingArgs::default());
    let loner = PodBuilder::new("loner").info();
    assert!(
        f.plugin.pre_enqueue(&loner).is_success(),
        "a pod of no group"
    );
    let orphan = member("orphan", "missing").info();
    assert!(
        f.plugin.pre_enqueue(&orphan).is_success(),
        "a group that does not exist is Permit's to refuse"
    );
    f.add_group(group("gang", 3));
    let pods = f.gang("gang", 2);
    assert_eq!(
        outcome(&f.plugin.pre_enqueue(&pods[0])),
        (
            Code::UnschedulableAndUnresolvable,
            not_enough_siblings("pre-enqueue", "gang-0", 2, 3)
        )
    );
    f.gang_extra("gang", 2);
    assert!(f.plugin.pre_enqueue(&pods[0]).is_success());
}

impl Fixture {
    fn gang_extra(&self, group: &str, index: usize) -> Arc<PodInfo> {
        self.add_pods([member(&format!("{group}-{index}"), group)])
            .remove(0)
    }
}

#[test]
fn pre_filter_table() {
    struct Row {
        name: &'static str,
        min_member: i32,
        min_resources: &'static [(&'static str, &'static str)],
        members: usize,
        gated: usize,
        want: Result<(), String>,
    }
    let rows = [
        Row {
            name: "quorum reached",
            min_member: 3,
            min_resources: &[],
            members: 3,
            gated: 0,
            want: Ok(()),
        },
        Row {
            name: "too few pods",
            min_member: 4,
            min_resources: &[],
            members: 3,
            gated: 0,
            want: Err(not_enough_siblings("pre-filter", "g-0", 3, 4)),
        },
        Row {
            name: "a gated pod within the slack",
            min_member: 3,
            min_resources: &[],
            members: 4,
            gated: 1,
            want: Ok(()),
        },
        Row {
            name: "gated pods beyond the slack",
            min_member: 3,
            min_resources: &[],
            members: 4,
            gated: 2,
            want: Err(gated_siblings("g-0")),
        },
        Row {
            name: "the cluster has room for the group",
            min_member: 2,
            min_resources: &[("cpu", "6")],
            members: 2,
            gated: 0,
            want: Ok(()),
        },
        Row {
            name: "the cluster lacks cpu and pod slots",
            min_member: 12,
            min_resources: &[("cpu", "9500m"), ("memory", "1Gi")],
            members: 12,
            gated: 0,
            want: Err("resource gap: map[cpu:3500m pods:3]".into()),
        },
    ];
    for row in rows {
        let f = fixture(CoschedulingArgs::default());
        let mut pg = group("g", row.min_member);
        if !row.min_resources.is_empty() {
            pg.spec.min_resources = Some(
                row.min_resources
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            );
        }
        f.add_group(pg);
        let gated = row.gated;
        let pods = f.add_pods((0..row.members).map(|i| {
            let b = member(&format!("g-{i}"), "g");
            if i >= row.members - gated {
                b.scheduling_gate("example.com/wait")
            } else {
                b
            }
        }));
        // Two nodes of 4 cpu, 5 pods each; one runs a 2-cpu pod of no group and one pod
        // of the group (whose room counts as the group's).
        let other = PodBuilder::new("other")
            .container(&[("cpu", "2")])
            .node("n1")
            .info();
        let placed = member("g-placed", "g").node("n2").info();
        let nodes = node_infos(
            vec![
                NodeBuilder::new("n1").capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "5")]),
                NodeBuilder::new("n2").capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "5")]),
            ],
            &[other, placed],
        );
        f.handle.set_snapshot(Arc::new(Snapshot::new(nodes)));
        let got = f.pre_filter(&pods[0]);
        match row.want {
            Ok(()) => assert!(got.is_success(), "{}: {got}", row.name),
            Err(message) => assert_eq!(
                outcome(&got),
                (Code::UnschedulableAndUnresolvable, message),
                "{}",
                row.name
            ),
        }
    }
}

#[test]
fn permit_waits_for_min_member_then_allows_the_whole_group() {
    let f = fixture(CoschedulingArgs::default());
    let loner = PodBuilder::new("loner").info();
    assert!(f.permit(&loner).0.is_success());
    let orphan = member("orphan", "missing").info();
    assert_eq!(
        outcome(&f.permit(&orphan).0),
        (Code::Unschedulable, ERR_POD_GROUP_NOT_FOUND.into())
    );

    let mut pg = group("gang", 3);
    pg.spec.schedule_timeout_seconds = Some(15);
    f.add_group(pg);
    let pods = f.gang("gang", 3);
    let (first, wait) = f.permit(&pods[0]);
    assert!(first.is_wait());
    assert_eq!(wait, Duration::from_secs(15), "the group's own timeout");
    assert!(f.permit(&pods[1]).0.is_wait());
    let waiting: Vec<_> = f.handle.waiting_pods().list();
    assert_eq!(waiting.len(), 2);
    assert!(waiting.iter().all(|w| w.is_waiting()));
    assert!(
        f.permit(&pods[2]).0.is_success(),
        "the third pod completes the group"
    );
    assert!(
        waiting.iter().all(|w| !w.is_waiting()),
        "every waiting sibling is allowed"
    );
}

#[test]
fn permit_with_a_negative_group_timeout_does_not_wait() {
    // As upstream's GetWaitTimeDuration: a set scheduleTimeoutSeconds is used as it is, a
    // negative one (or 0) times the waiting pod out at once rather than falling back to
    // permitWaitingTimeSeconds.
    let f = fixture(CoschedulingArgs::default());
    let mut pg = group("gang", 2);
    pg.spec.schedule_timeout_seconds = Some(-10);
    f.add_group(pg);
    let pods = f.gang("gang", 2);
    let (first, wait) = f.permit(&pods[0]);
    assert!(first.is_wait());
    assert_eq!(wait, Duration::ZERO);
}

#[test]
fn permit_without_a_group_timeout_waits_as_long_as_the_args_say() {
    let f = fixture(CoschedulingArgs {
        permit_waiting_time_seconds: 7,
        ..Default::default()
    });
    f.add_group(group("gang", 2));
    let pods = f.gang("gang", 2);
    assert_eq!(f.permit(&pods[0]).1, Duration::from_secs(7));
}

#[test]
fn unreserve_rejects_the_waiting_siblings() {
    let f = fixture(CoschedulingArgs::default());
    f.add_group(group("gang", 3));
    f.add_group(group("other", 2));
    let pods = f.gang("gang", 3);
    let others = f.gang("other", 2);
    f.permit(&pods[0]);
    f.permit(&pods[1]);
    f.permit(&others[0]);
    f.plugin.unreserve(&mut CycleState::new(), &pods[1], "n1");
    let by_pod: HashMap<String, bool> = f
        .handle
        .waiting_pods()
        .list()
        .iter()
        .map(|w| (w.pod().name.clone(), w.is_waiting()))
        .collect();
    assert!(!by_pod["gang-0"], "a sibling is rejected");
    assert!(by_pod["other-0"], "another group waits on");
    // The unreserved pod no longer counts: two more placements are needed again.
    f.handle.waiting_pods().remove(&pods[0].uid);
    f.handle.waiting_pods().remove(&pods[1].uid);
    assert!(f.permit(&pods[2]).0.is_wait());
}

#[test]
fn post_filter_table() {
    // (name, minMember, placed before the failure, reject percentage, want)
    type Row = (&'static str, i32, usize, i32, (Code, String));
    let rows: [Row; 4] = [
        (
            "quorum already placed",
            2,
            2,
            10,
            (Code::Unschedulable, String::new()),
        ),
        (
            "a small gap lets the rest try",
            10,
            9,
            10,
            (Code::Unschedulable, String::new()),
        ),
        (
            "the whole group is rejected",
            4,
            1,
            10,
            (
                Code::Unschedulable,
                group_rejected("default/gang", "gang-3"),
            ),
        ),
        (
            "percentage 0 rejects on any gap",
            10,
            9,
            0,
            (
                Code::Unschedulable,
                group_rejected("default/gang", "gang-9"),
            ),
        ),
    ];
    for (name, min, placed, percentage, want) in rows {
        let f = fixture(CoschedulingArgs {
            pod_group_reject_percentage: percentage,
            ..Default::default()
        });
        f.add_group(group("gang", min));
        let pods = f.gang("gang", min as usize);
        for p in &pods[..placed] {
            f.plugin
                .book
                .lock()
                .placed
                .entry("default/gang".into())
                .or_default()
                .insert(p.name.clone());
        }
        let failing = &pods[min as usize - 1];
        assert_eq!(outcome(&f.post_filter(failing)), want, "{name}");
    }
    let f = fixture(CoschedulingArgs::default());
    assert_eq!(
        outcome(&f.post_filter(&PodBuilder::new("loner").info())),
        (Code::Unschedulable, ERR_NO_POD_GROUP.into())
    );
}

#[test]
fn post_filter_rejects_waiting_siblings_and_backs_the_group_off() {
    let f = fixture(CoschedulingArgs {
        pod_group_backoff_seconds: 30,
        ..Default::default()
    });
    f.add_group(group("gang", 3));
    let pods = f.gang("gang", 3);
    f.permit(&pods[0]);
    let rejected = f.post_filter(&pods[2]);
    assert_eq!(rejected.message(), group_rejected("default/gang", "gang-2"));
    assert!(!f.handle.waiting_pods().list()[0].is_waiting());
    assert_eq!(
        outcome(&f.pre_filter(&pods[1])),
        (
            Code::UnschedulableAndUnresolvable,
            failed_recently("default/gang")
        )
    );
    f.clock.advance(Duration::from_secs(31));
    assert!(f.pre_filter(&pods[1]).is_success(), "the backoff is over");
}

/// The deny cache: after PostFilter gives a whole group up, PreFilter refuses every pod of
/// it until the group's backoff ends on the scheduler's clock, then lets them through.
fn check_deny(backoff_seconds: i64, refused_for: Duration) {
    let f = fixture(CoschedulingArgs {
        pod_group_backoff_seconds: backoff_seconds,
        ..Default::default()
    });
    f.add_group(group("gang", 3));
    f.add_group(group("other", 1));
    let pods = f.gang("gang", 3);
    let other = f.gang("other", 1);
    assert!(f.pre_filter(&pods[0]).is_success(), "not denied yet");
    f.permit(&pods[0]);
    f.permit(&pods[1]);
    assert_eq!(
        f.post_filter(&pods[2]).message(),
        group_rejected("default/gang", "gang-2")
    );
    let refused = (
        Code::UnschedulableAndUnresolvable,
        failed_recently("default/gang"),
    );
    // The siblings released from Permit and the pod that did not fit alike.
    for pod in &pods {
        assert_eq!(outcome(&f.pre_filter(pod)), refused, "{}", pod.name);
    }
    assert!(f.pre_filter(&other[0]).is_success(), "other groups go on");
    f.clock.advance(refused_for - Duration::from_millis(1));
    assert_eq!(
        outcome(&f.pre_filter(&pods[1])),
        refused,
        "just before the end"
    );
    f.clock.advance(Duration::from_millis(1));
    for pod in &pods {
        assert!(
            f.pre_filter(pod).is_success(),
            "{}: the backoff is over",
            pod.name
        );
    }
}

#[test]
fn a_rejected_group_is_denied_for_pod_group_backoff_seconds() {
    check_deny(5, Duration::from_secs(5));
}

#[test]
fn a_rejected_group_is_denied_for_a_second_without_pod_group_backoff_seconds() {
    check_deny(0, REJECTED_GROUP_DEFAULT_BACKOFF);
}

#[test]
fn a_group_short_of_pods_is_not_denied() {
    // Only two of three pods exist (they were queued before the PodGroup was known): the
    // group is not backed off, so the third pod's arrival is enough to try it again.
    let f = fixture(CoschedulingArgs::default());
    f.add_group(group("gang", 3));
    let pods = f.gang("gang", 2);
    f.post_filter(&pods[1]);
    let third = f.gang_extra("gang", 2);
    assert!(f.pre_filter(&third).is_success());
}

#[test]
fn a_pod_refused_at_pre_filter_does_not_back_its_group_off() {
    // Two of three pods: PreFilter refuses the second for want of a sibling; the third
    // appears before that cycle's PostFilter runs. The group was never tried, so it is
    // not backed off: the third pod's arrival is enough to try it.
    let f = fixture(CoschedulingArgs::default());
    f.add_group(group("gang", 3));
    let pods = f.gang("gang", 2);
    let mut state = CycleState::new();
    let (_, refused) = f.plugin.pre_filter(&mut state, &pods[1], &[]);
    assert_eq!(refused.code(), Code::UnschedulableAndUnresolvable);
    let third = f.gang_extra("gang", 2);
    assert_eq!(
        f.post_filter_after(&state, &pods[1]).message(),
        group_rejected("default/gang", "gang-1")
    );
    assert!(f.pre_filter(&third).is_success(), "not backed off");
}

#[test]
fn a_pod_refused_for_the_backoff_does_not_extend_it() {
    let f = fixture(CoschedulingArgs {
        pod_group_backoff_seconds: 5,
        ..Default::default()
    });
    f.add_group(group("gang", 3));
    let pods = f.gang("gang", 3);
    f.post_filter(&pods[2]);
    f.clock.advance(Duration::from_secs(3));
    // A sibling retried meanwhile is refused for the backoff and fails its cycle.
    let mut state = CycleState::new();
    let (_, refused) = f.plugin.pre_filter(&mut state, &pods[0], &[]);
    assert_eq!(refused.message(), failed_recently("default/gang"));
    f.post_filter_after(&state, &pods[0]);
    f.clock.advance(Duration::from_secs(2));
    assert!(
        f.pre_filter(&pods[0]).is_success(),
        "the backoff ends 5 s after the group failed"
    );
}

#[tokio::test(start_paused = true)]
async fn in_a_cluster_the_group_is_activated_when_its_backoff_ends() {
    // The pods refused for the backoff wait in unschedulablePods and no cluster event
    // marks its end: the plugin brings the group's pending pods back itself.
    let pods = Arc::new(Pods::default());
    let (sent, mut activations) = tokio::sync::mpsc::unbounded_channel();
    let handle = Handle::builder()
        .live_pods(pods.clone())
        .runtime(tokio::runtime::Handle::current())
        .build_with_control();
    handle.set_activator(Arc::new(Sender(sent)));
    let groups = Arc::new(Store::<PodGroup>::default());
    groups.upsert(group("gang", 3));
    let args = CoschedulingArgs {
        pod_group_backoff_seconds: 7,
        ..Default::default()
    };
    let plugin = Coscheduling::with_groups(&args, &handle, groups).expect("valid args");
    let members: Vec<Arc<PodInfo>> = (0..3)
        .map(|i| member(&format!("gang-{i}"), "gang").info())
        .chain([member("gang-bound", "gang").node("n1").info()])
        .collect();
    pods.0.lock().extend(members.iter().cloned());
    let fw = Framework::from_instances(
        kubesched_framework::ProfileSpec::default(),
        handle.clone(),
        Arc::new(kubesched_framework::metrics::NoMetrics),
        Default::default(),
        Default::default(),
    )
    .expect("an empty profile");
    let failed_at = tokio::time::Instant::now();
    let (_, status) = plugin
        .post_filter(
            &fw,
            &CycleState::new(),
            &members[2],
            &NodeToStatus::default(),
        )
        .await;
    assert_eq!(status.message(), group_rejected("default/gang", "gang-2"));
    // Paused time: the timeout passes at once when nothing else is due.
    let mut woken = tokio::time::timeout(Duration::from_secs(60), activations.recv())
        .await
        .expect("an activation when the backoff ends")
        .expect("an activation");
    assert!(
        failed_at.elapsed() >= Duration::from_secs(7),
        "not before the end"
    );
    woken.sort();
    assert_eq!(woken, ["gang-0", "gang-1", "gang-2"], "the bound pod stays");
}

struct Sender(tokio::sync::mpsc::UnboundedSender<Vec<String>>);

impl kubesched_framework::PodActivator for Sender {
    fn activate(&self, uids: &[String]) {
        let _ = self.0.send(uids.to_vec());
    }
}

#[test]
fn a_placed_pod_activates_its_siblings_after_the_group_failed() {
    // Upstream's Permit: the group's first placed pod brings its siblings back, also
    // right after the group was given up (the deny at PreFilter keeps that from looping).
    let f = fixture(CoschedulingArgs::default());
    let activated = Arc::new(Mutex::new(Vec::<String>::new()));
    f.handle
        .set_activator(Arc::new(Recorder(activated.clone())));
    f.add_group(group("gang", 3));
    let pods = f.gang("gang", 3);
    f.permit(&pods[0]);
    f.post_filter(&pods[2]);
    f.plugin.unreserve(&mut CycleState::new(), &pods[0], "n1");
    f.handle.waiting_pods().remove(&pods[0].uid);
    activated.lock().clear();
    f.clock.advance(REJECTED_GROUP_DEFAULT_BACKOFF);
    assert!(f.pre_filter(&pods[1]).is_success());
    assert!(f.permit(&pods[1]).0.is_wait());
    let mut got = activated.lock().clone();
    got.sort();
    assert_eq!(got, ["gang-0", "gang-2"]);
}

struct Recorder(Arc<Mutex<Vec<String>>>);

impl kubesched_framework::PodActivator for Recorder {
    fn activate(&self, uids: &[String]) {
        self.0.lock().extend(uids.iter().cloned());
    }
}

#[test]
fn a_deleted_pod_groups_records_are_forgotten() {
    let f = fixture(CoschedulingArgs {
        pod_group_backoff_seconds: 30,
        ..Default::default()
    });
    f.add_group(group("gang", 3));
    f.add_group(group("other", 2));
    let pods = f.gang("gang", 3);
    let others = f.gang("other", 2);
    // Every kind of record for "gang": whole (PreEnqueue), placed (Permit), failure and
    // backoff (PostFilter); "other" is placed and whole too.
    assert!(f.plugin.pre_enqueue(&pods[0]).is_success());
    f.permit(&pods[0]);
    assert!(!f.post_filter(&pods[2]).is_success());
    f.permit(&pods[1]);
    assert!(f.plugin.pre_enqueue(&others[0]).is_success());
    f.permit(&others[0]);
    assert_eq!(
        f.plugin.book().groups_recorded(),
        ["default/gang", "default/other"].into()
    );

    f.groups.remove(Some("default"), "gang");
    // The plugin's next call notices the delete.
    assert!(f.pre_filter(&others[1]).is_success());
    assert_eq!(f.plugin.book().groups_recorded(), ["default/other"].into());
    let book = f.plugin.book();
    assert!(book.placed.contains_key("default/other"));
    assert!(book.whole.contains("default/other"));

    // A new PodGroup of the same name starts clean: no backoff from the old one.
    drop(book);
    f.add_group(group("gang", 3));
    assert!(f.pre_filter(&pods[1]).is_success());
}

#[test]
fn post_bind_counts_the_bound_pods_and_writes_only_changes() {
    // On a runtime (never driven here), so the writes are started and stay counted.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let _entered = runtime.enter();
    let f = fixture(CoschedulingArgs::default());
    assert!(f.handle.can_spawn());
    f.add_group(group("gang", 3));
    let pods = f.gang("gang", 4);
    let bind = |pod: &PodInfo| f.plugin.post_bind(&CycleState::new(), pod, "n1");
    let written = || {
        let book = f.plugin.book();
        (
            book.scheduled_written.get("default/gang").copied(),
            book.phase_written.get("default/gang").copied(),
        )
    };

    bind(&pods[0]);
    assert_eq!(written(), (Some(1), None));
    assert_eq!(f.handle.background_tasks(), 1);
    bind(&pods[0]);
    assert_eq!(
        f.handle.background_tasks(),
        1,
        "the same count is not written again"
    );
    bind(&pods[1]);
    assert_eq!(written(), (Some(2), None));
    bind(&pods[2]);
    assert_eq!(
        written(),
        (Some(3), Some(phase::SCHEDULED)),
        "minMember bound: Scheduled"
    );
    bind(&pods[3]);
    assert_eq!(written(), (Some(4), Some(phase::SCHEDULED)));
    assert_eq!(f.handle.background_tasks(), 4);

    // A bound pod that leaves (deleted, finished) is not counted at the next bind.
    f.pods.0.lock().retain(|p| p.name != "gang-0");
    let late = f.add_pods([member("gang-9", "gang")]);
    bind(&late[0]);
    assert_eq!(written(), (Some(4), Some(phase::SCHEDULED)));
    assert_eq!(f.handle.background_tasks(), 4, "4 again: nothing to write");
}

/// A pod of `group` in phase `phase`, as the pod events carry it.
fn api_pod(name: &str, group: &str, phase: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default",
                     "labels": {POD_GROUP_LABEL: group}},
        "status": {"phase": phase}
    }))
    .expect("a pod")
}

#[test]
fn pod_events_count_the_groups_pods_and_move_its_phase() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let _entered = runtime.enter();
    let f = fixture(CoschedulingArgs::default());
    let mut pg = group("gang", 2);
    pg.status = Some(PodGroupStatus {
        phase: Some(phase::SCHEDULED.into()),
        scheduled: 2,
        ..Default::default()
    });
    f.add_group(pg.clone());
    pg.metadata.name = Some("doomed".into());
    f.add_group(pg);
    let state = |group: &str| {
        let book = f.plugin.book();
        let full = format!("default/{group}");
        (
            book.counts_written.get(&full).copied(),
            book.phase_written.get(&full).copied(),
        )
    };
    let event = |old: Option<&k8s_openapi::api::core::v1::Pod>,
                 new: Option<&k8s_openapi::api::core::v1::Pod>| {
        f.plugin.on_pod_event(old, new);
    };

    let a = api_pod("a", "gang", "Pending");
    event(None, Some(&a));
    assert_eq!(state("gang"), (None, None), "nothing counted yet: no write");
    assert_eq!(f.handle.background_tasks(), 0);
    let a_running = api_pod("a", "gang", "Running");
    event(Some(&a), Some(&a_running));
    assert_eq!(state("gang"), (Some((1, 0, 0)), None));
    let b = api_pod("b", "gang", "Running");
    event(None, Some(&b));
    assert_eq!(state("gang"), (Some((2, 0, 0)), Some(phase::RUNNING)));
    assert_eq!(f.handle.background_tasks(), 2);
    event(Some(&b), Some(&b));
    assert_eq!(f.handle.background_tasks(), 2, "no change, no write");
    let b_done = api_pod("b", "gang", "Succeeded");
    event(Some(&b), Some(&b_done));
    assert_eq!(state("gang"), (Some((1, 1, 0)), Some(phase::RUNNING)));
    let a_done = api_pod("a", "gang", "Succeeded");
    event(Some(&a_running), Some(&a_done));
    assert_eq!(state("gang"), (Some((0, 2, 0)), Some(phase::FINISHED)));
    // Finished is final: a deletion changes nothing more.
    let tasks = f.handle.background_tasks();
    event(Some(&a_done), None);
    assert_eq!(state("gang"), (Some((0, 2, 0)), Some(phase::FINISHED)));
    assert_eq!(f.handle.background_tasks(), tasks);

    // One pod failed and, with the running one, the group reaches minMember: Failed.
    let x = api_pod("x", "doomed", "Running");
    event(None, Some(&x));
    assert_eq!(state("doomed"), (Some((1, 0, 0)), None));
    let y = api_pod("y", "doomed", "Failed");
    event(None, Some(&y));
    assert_eq!(state("doomed"), (Some((1, 0, 1)), Some(phase::FAILED)));

    // A pod of a PodGroup not known yet is followed (the group may come later) without a
    // write, and forgotten when deleted; a pod of no group is ignored.
    let tasks = f.handle.background_tasks();
    let early = api_pod("z", "later", "Running");
    event(None, Some(&early));
    assert_eq!(f.handle.background_tasks(), tasks);
    assert_eq!(
        f.plugin.book().pod_phases["default/later"]
            .get("z")
            .map(String::as_str),
        Some("Running")
    );
    f.add_group(group("unrelated", 1));
    assert!(
        f.plugin.book().pod_phases.contains_key("default/later"),
        "not dropped with the records of deleted PodGroups"
    );
    event(Some(&early), None);
    assert!(!f.plugin.book().pod_phases.contains_key("default/later"));
    let loner: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "l"}})).expect("a pod");
    event(None, Some(&loner));
    assert_eq!(f.plugin.book().pod_phases.len(), 2, "gang and doomed only");
}

#[test]
fn queue_sort_keeps_a_group_together() {
    let f = fixture(CoschedulingArgs::default());
    let created = |pg: &mut PodGroup, secs: i64| {
        pg.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + secs).expect("a time"),
        ));
    };
    let mut early = group("early", 2);
    created(&mut early, 0);
    let mut late = group("late", 2);
    created(&mut late, 100);
    f.add_group(early);
    f.add_group(late);
    let now = f.clock.now();
    let queued = |b: PodBuilder| QueuedPodInfo::new(b.info(), now);
    let late_a = queued(member("a", "late"));
    let early_z = queued(member("z", "early"));
    let early_y = queued(member("y", "early"));
    let urgent = queued(PodBuilder::new("urgent").priority(10));
    let less = |a: &QueuedPodInfo, b: &QueuedPodInfo| f.plugin.less(a, b);
    assert!(less(&urgent, &early_z), "priority first");
    assert!(less(&early_z, &late_a), "then the group's creation");
    assert!(less(&early_y, &early_z), "then the pod's name");
    // A group that failed sorts as if created at its failure.
    f.plugin.mark_failure("default/early");
    assert!(less(&late_a, &early_z));
    // Pods of no group queued at the same time tie on `namespace/name` as one string, as
    // upstream compares them: `a-b/x` before `a/x` ('-' sorts before '/').
    let short = queued(PodBuilder::new("x").namespace("a"));
    let long = queued(PodBuilder::new("x").namespace("a-b"));
    assert!(less(&long, &short));
    assert!(!less(&short, &long));
}

#[test]
fn a_passed_min_resources_check_holds_for_the_permit_waiting_time() {
    // (permitWaitingTimeSeconds, how long the check holds): 0 is upstream's cache default.
    for (args_secs, holds) in [(20, 20), (0, 3)] {
        let f = fixture(CoschedulingArgs {
            permit_waiting_time_seconds: args_secs,
            ..Default::default()
        });
        let mut pg = group("g", 2);
        pg.spec.min_resources = Some([("cpu".to_string(), Quantity("6".into()))].into());
        f.add_group(pg);
        let pods = f.gang("g", 2);
        let node = |cpu: &str| {
            NodeBuilder::new("n1").capacity(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "10")])
        };
        f.handle
            .set_snapshot(Arc::new(Snapshot::new(node_infos(vec![node("8")], &[]))));
        assert!(f.pre_filter(&pods[0]).is_success());
        // The cluster shrinks; the passed check still holds until its time is up.
        f.handle
            .set_snapshot(Arc::new(Snapshot::new(node_infos(vec![node("4")], &[]))));
        f.clock.advance(Duration::from_secs(holds - 1));
        assert!(f.pre_filter(&pods[0]).is_success(), "within {holds}s");
        f.clock.advance(Duration::from_secs(1));
        assert_eq!(
            outcome(&f.pre_filter(&pods[0])),
            (
                Code::UnschedulableAndUnresolvable,
                "resource gap: map[cpu:2000m]".into()
            ),
            "after {holds}s"
        );
    }
}

#[test]
fn bad_args_are_refused() {
    let handle = Handle::default();
    let err = Coscheduling::with_groups(
        &CoschedulingArgs {
            pod_group_backoff_seconds: -1,
            ..Default::default()
        },
        &handle,
        Arc::new(Store::default()),
    )
    .expect_err("negative backoff");
    assert!(err.0.contains("podGroupBackoffSeconds"), "{err}");
}

#[test]
fn pod_group_events_requeue_their_own_pods_on_spec_changes_only() {
    let f = fixture(CoschedulingArgs::default());
    let events = kubesched_framework::EnqueueExtensions::events_to_register(&f.plugin);
    use kubesched_framework::events::{ActionType, ClusterEvent, EventResource};
    let registered: Vec<ClusterEvent> = events.iter().map(|e| e.event).collect();
    assert_eq!(
        registered,
        [
            ClusterEvent::new(EventResource::Pod, ActionType::ADD),
            ClusterEvent::new(
                EventResource::of::<PodGroup>(),
                ActionType::ADD.union(ActionType::UPDATE)
            ),
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_ALLOCATABLE)
            ),
        ]
    );
    let hint = events[1].hint.as_ref().expect("a PodGroup hint");
    let pod = member("gang-0", "gang").info();
    let obj = |pg: PodGroup| kubesched_framework::events::EventObject::object(Arc::new(pg));
    let grown = {
        let mut pg = group("gang", 3);
        pg.spec.min_member = 2;
        pg
    };
    let mut status_only = group("gang", 3);
    status_only.status = Some(PodGroupStatus {
        phase: Some(phase::SCHEDULING.into()),
        ..Default::default()
    });
    let queue = kubesched_framework::events::QueueingHint::Queue;
    let skip = kubesched_framework::events::QueueingHint::Skip;
    assert_eq!(hint(&pod, None, Some(&obj(group("gang", 3)))), Ok(queue));
    assert_eq!(
        hint(&pod, Some(&obj(group("gang", 3))), Some(&obj(grown))),
        Ok(queue)
    );
    assert_eq!(
        hint(&pod, Some(&obj(group("gang", 3))), Some(&obj(status_only))),
        Ok(skip)
    );
    assert_eq!(hint(&pod, None, Some(&obj(group("other", 3)))), Ok(skip));
}

#[test]
fn registered_with_its_kind_and_status_writes() {
    let desc = kubesched_framework::registry::find(NAME).expect("registered");
    assert_eq!(
        desc.kinds,
        &[kubesched_framework::ObjectKind::of::<PodGroup>()]
    );
    assert_eq!(desc.kinds[0].resource(), "podgroups.scheduling.x-k8s.io");
    assert_eq!(desc.writes[0].status_verbs, ["update", "patch"]);
    let points: Vec<&str> = desc.extension_points().iter().map(|p| p.as_str()).collect();
    assert_eq!(
        points,
        [
            "QueueSort",
            "PreEnqueue",
            "PreFilter",
            "PostFilter",
            "Reserve",
            "Permit",
            "PostBind",
            "EnqueueExtensions"
        ]
    );
}

/// One line of a group's life: the point, the pod, and what the plugin answered.
fn line(point: &str, pod: &PodInfo, status: &Status) -> String {
    let message = status.message();
    if message.is_empty() {
        format!("{point} {}: {:?}", pod.name, status.code())
    } else {
        format!("{point} {}: {:?}: {message}", pod.name, status.code())
    }
}

#[test]
fn a_group_through_every_point() {
    let f = fixture(CoschedulingArgs {
        pod_group_backoff_seconds: 10,
        ..Default::default()
    });
    let mut pg = group("gang", 3);
    pg.spec.schedule_timeout_seconds = Some(20);
    f.add_group(pg);
    let mut trace = Vec::new();
    let pods = f.gang("gang", 2);
    trace.push(line(
        "PreEnqueue",
        &pods[0],
        &f.plugin.pre_enqueue(&pods[0]),
    ));
    trace.push(line("PreFilter", &pods[0], &f.pre_filter(&pods[0])));
    let third = f.gang_extra("gang", 2);
    trace.push(line("PreEnqueue", &third, &f.plugin.pre_enqueue(&third)));
    for p in [&pods[0], &pods[1]] {
        trace.push(line("PreFilter", p, &f.pre_filter(p)));
        let (status, wait) = f.permit(p);
        trace.push(format!("{} (wait {wait:?})", line("Permit", p, &status)));
    }
    // The third pod fits nowhere: PostFilter gives the group up and backs it off.
    trace.push(line("PostFilter", &third, &f.post_filter(&third)));
    let mut waiting = f.handle.waiting_pods().list();
    waiting.sort_by(|a, b| a.pod().name.cmp(&b.pod().name));
    for w in waiting {
        trace.push(format!(
            "waiting {}: still waiting: {}",
            w.pod().name,
            w.is_waiting()
        ));
        f.handle.waiting_pods().remove(&w.pod().uid);
    }
    f.plugin.unreserve(&mut CycleState::new(), &pods[0], "n1");
    f.plugin.unreserve(&mut CycleState::new(), &pods[1], "n1");
    trace.push(line("PreFilter", &pods[0], &f.pre_filter(&pods[0])));
    f.clock.advance(Duration::from_secs(10));
    trace.push(line("PreFilter", &pods[0], &f.pre_filter(&pods[0])));
    // Room again: all three are placed, the last one completes the group.
    for p in [&pods[0], &pods[1], &third] {
        let (status, wait) = f.permit(p);
        trace.push(format!("{} (wait {wait:?})", line("Permit", p, &status)));
    }
    insta::assert_yaml_snapshot!(trace);
}
