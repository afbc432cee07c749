//! Work outside the scheduling cycle: `Handle::spawn_background` from the parallelizer's
//! threads (a Filter plugin runs off the async runtime and still starts background work on
//! the runtime the handle was built on), and pod events told to `PodEventsPlugin`s.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kubesched_framework::metrics::NoMetrics;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, ExtensionPoint, FilterPlugin, Framework, Handle, Plugin, PluginRef, ProfileSpec,
    Status,
};
use kubesched_testing::{NodeBuilder, PodBuilder, node_info};

/// Starts one background task per node it filters; the task counts itself done.
struct Spawner {
    handle: Handle,
    done: Arc<AtomicUsize>,
    /// Filter calls made on a thread outside any async runtime.
    off_runtime: Arc<AtomicUsize>,
}

impl Plugin for Spawner {
    fn name(&self) -> &str {
        "Spawner"
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl FilterPlugin for Spawner {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        if tokio::runtime::Handle::try_current().is_err() {
            self.off_runtime.fetch_add(1, Ordering::SeqCst);
        }
        let done = self.done.clone();
        if !self.handle.spawn_background(async move {
            tokio::task::yield_now().await;
            done.fetch_add(1, Ordering::SeqCst);
        }) {
            return Status::error("no runtime to spawn on");
        }
        Status::success()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_on_a_parallel_thread_spawns_on_the_handles_runtime() {
    let handle = Handle::builder().parallelism(4).build();
    assert!(handle.can_spawn());
    let done = Arc::new(AtomicUsize::new(0));
    let off_runtime = Arc::new(AtomicUsize::new(0));
    let plugin: Arc<dyn Plugin> = Arc::new(Spawner {
        handle: handle.clone(),
        done: done.clone(),
        off_runtime: off_runtime.clone(),
    });
    let mut spec = ProfileSpec {
        scheduler_name: "test".into(),
        ..Default::default()
    };
    spec.plugins
        .entry(ExtensionPoint::Filter)
        .or_default()
        .push(PluginRef::new("Spawner"));
    let fw = Framework::from_instances(
        spec,
        handle.clone(),
        Arc::new(NoMetrics),
        BTreeMap::from([("Spawner".to_string(), plugin)]),
        BTreeMap::new(),
    )
    .expect("valid framework");
    let nodes: Vec<Arc<NodeInfo>> = (0..256)
        .map(|i| node_info(NodeBuilder::new(&format!("n{i}")), &[]))
        .collect();
    let pod = PodBuilder::new("p").info();
    let state = CycleState::new();
    let statuses = tokio::task::block_in_place(|| {
        handle.parallelizer().map(nodes.len(), |i| {
            fw.run_filter_plugins(&state, &pod, &nodes[i])
        })
    });
    assert!(statuses.iter().all(Status::is_success), "{statuses:?}");
    // 256 nodes: enough for the parallelizer to use its pool (when the machine has more
    // than one core), whose threads are outside the runtime.
    if handle.parallelizer().is_parallel() {
        assert_eq!(
            off_runtime.load(Ordering::SeqCst),
            nodes.len(),
            "every Filter ran off the runtime"
        );
    }
    tokio::time::timeout(Duration::from_secs(10), async {
        while done.load(Ordering::SeqCst) < nodes.len() || handle.background_tasks() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every background task ran");
    assert_eq!(done.load(Ordering::SeqCst), nodes.len());
}

#[test]
fn a_handle_without_a_runtime_drops_the_work_instead_of_panicking() {
    let handle = Handle::builder().build();
    assert!(!handle.can_spawn());
    assert!(!handle.spawn_background(async {}));
    assert_eq!(handle.background_tasks(), 0);
}

#[test]
fn a_handle_given_a_runtime_spawns_from_a_plain_thread() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let handle = Handle::builder().runtime(runtime.handle().clone()).build();
    let (tx, rx) = std::sync::mpsc::channel();
    let spawner = handle.clone();
    std::thread::spawn(move || {
        assert!(spawner.spawn_background(async move {
            tx.send(()).expect("receiver alive");
        }));
    })
    .join()
    .expect("the thread ends");
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the work ran on the handle's runtime");
}

/// Counts the pod events it is told of.
struct Watcher(Arc<AtomicUsize>);
kubesched_framework::impl_plugin!(Watcher, name: "Watcher");

impl kubesched_framework::PodEventsPlugin for Watcher {
    fn on_pod_event(
        &self,
        old: Option<&k8s_openapi::api::core::v1::Pod>,
        new: Option<&k8s_openapi::api::core::v1::Pod>,
    ) {
        assert!(old.is_some() || new.is_some());
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn pod_events_reach_the_plugins_that_observe_them() {
    let seen = Arc::new(AtomicUsize::new(0));
    let watcher: Arc<dyn Plugin> = Arc::new(Watcher(seen.clone()));
    assert!(watcher.as_pod_events().is_some());
    assert!(
        kubesched_framework::implemented_points(watcher.as_ref()).is_empty(),
        "not an extension point of the cycle"
    );
    let spawner: Arc<dyn Plugin> = Arc::new(Spawner {
        handle: Handle::default(),
        done: Arc::default(),
        off_runtime: Arc::default(),
    });
    assert!(spawner.as_pod_events().is_none());
    let mut spec = ProfileSpec {
        scheduler_name: "test".into(),
        ..Default::default()
    };
    spec.plugins
        .entry(ExtensionPoint::Filter)
        .or_default()
        .push(PluginRef::new("Spawner"));
    let fw = Framework::from_instances(
        spec,
        Handle::default(),
        Arc::new(NoMetrics),
        BTreeMap::from([
            ("Spawner".to_string(), spawner),
            ("Watcher".to_string(), watcher),
        ]),
        BTreeMap::new(),
    )
    .expect("valid framework");
    let pod = k8s_openapi::api::core::v1::Pod::default();
    fw.run_pod_event_plugins(None, Some(&pod));
    fw.run_pod_event_plugins(Some(&pod), Some(&pod));
    fw.run_pod_event_plugins(Some(&pod), None);
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}
