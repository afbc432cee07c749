//! The driver's own view of the workload's pods: a watch (through the driver's client,
//! not the scheduler's) that notes when each pod was created, when it was first seen
//! bound and whether the scheduler marked it unschedulable.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::sync::Notify;

#[derive(Debug, Default, Clone)]
struct Tracked {
    created: Option<Instant>,
    bound: Option<Instant>,
    unschedulable: bool,
    labels: BTreeMap<String, String>,
}

/// What the watch saw so far.
#[derive(Debug, Default)]
pub struct Seen {
    pods: HashMap<String, Tracked>,
    listed: bool,
    first_bind: Option<Instant>,
}

impl Seen {
    /// Whether every pod of `keys` is bound.
    pub fn all_bound(&self, keys: &[String]) -> bool {
        keys.iter()
            .all(|k| self.pods.get(k).is_some_and(|t| t.bound.is_some()))
    }

    /// Whether every pod of `keys` is bound or unschedulable.
    pub fn all_settled(&self, keys: &[String]) -> bool {
        keys.iter().all(|k| {
            self.pods
                .get(k)
                .is_some_and(|t| t.bound.is_some() || t.unschedulable)
        })
    }
}

/// The watch and its findings.
#[derive(Debug)]
pub struct PodTracker {
    seen: Arc<Mutex<Seen>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
}

impl PodTracker {
    /// Watches the pods of `namespaces`.
    pub fn start(client: Client, namespaces: BTreeSet<String>) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let changed = Arc::new(Notify::new());
        let api: Api<Pod> = Api::all(client);
        let (s, c) = (seen.clone(), changed.clone());
        let task = tokio::spawn(async move {
            let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let now = Instant::now();
                let mut guard = s.lock();
                let seen = &mut *guard;
                match event {
                    Ok(Event::Apply(pod) | Event::InitApply(pod)) => {
                        if !namespaces.contains(pod.metadata.namespace.as_deref().unwrap_or("")) {
                            continue;
                        }
                        let bound = pod
                            .spec
                            .as_ref()
                            .and_then(|s| s.node_name.as_deref())
                            .is_some_and(|n| !n.is_empty());
                        let first_bind = &mut seen.first_bind;
                        let mut newly_bound = false;
                        let t = seen.pods.entry(key_of(&pod)).or_default();
                        if bound && t.bound.is_none() {
                            t.bound = Some(now);
                            newly_bound = true;
                        }
                        t.unschedulable = !bound && unschedulable(&pod);
                        t.labels = pod.metadata.labels.clone().unwrap_or_default();
                        if newly_bound && first_bind.is_none() {
                            *first_bind = Some(now);
                        }
                    }
                    Ok(Event::Delete(pod)) => {
                        seen.pods.remove(&key_of(&pod));
                    }
                    Ok(Event::Init) => {}
                    Ok(Event::InitDone) => seen.listed = true,
                    Err(e) => {
                        tracing::warn!(error = %e, "the benchmark's pod watch failed; retrying")
                    }
                }
                drop(guard);
                c.notify_waiters();
            }
        });
        Self {
            seen,
            changed,
            task,
        }
    }

    /// Stops the watch.
    pub fn stop(&self) {
        self.task.abort();
    }

    /// Notes that the pod's create request was answered.
    pub fn created(&self, key: &str) {
        let now = Instant::now();
        self.seen
            .lock()
            .pods
            .entry(key.to_string())
            .or_default()
            .created
            .get_or_insert(now);
    }

    /// Waits (at most `timeout`) until `done` holds; whether it did.
    pub async fn wait_for(&self, timeout: Duration, done: impl Fn(&Seen) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if done(&self.seen.lock()) {
                return true;
            }
            // A change may be missed between the check and the wait: look again soon.
            let wake = deadline.min(tokio::time::Instant::now() + Duration::from_millis(50));
            if tokio::time::timeout_at(wake, notified).await.is_err()
                && tokio::time::Instant::now() >= deadline
            {
                return done(&self.seen.lock());
            }
        }
    }

    /// Waits until the watch has listed once.
    pub async fn wait_listed(&self, timeout: Duration) -> bool {
        self.wait_for(timeout, |s| s.listed).await
    }

    /// The first bind the watch saw.
    pub fn first_bind(&self) -> Option<Instant> {
        self.seen.lock().first_bind
    }

    /// How many of `keys` are bound.
    pub fn bound_count(&self, keys: &[String]) -> usize {
        let seen = self.seen.lock();
        keys.iter()
            .filter(|k| seen.pods.get(*k).is_some_and(|t| t.bound.is_some()))
            .count()
    }

    /// How many of `keys` are bound or unschedulable.
    pub fn settled_count(&self, keys: &[String]) -> usize {
        let seen = self.seen.lock();
        keys.iter()
            .filter(|k| {
                seen.pods
                    .get(*k)
                    .is_some_and(|t| t.bound.is_some() || t.unschedulable)
            })
            .count()
    }

    /// Of `keys`: (bound, unschedulable).
    pub fn counts(&self, keys: &[String]) -> (usize, usize) {
        let seen = self.seen.lock();
        let mut out = (0, 0);
        for t in keys.iter().filter_map(|k| seen.pods.get(k)) {
            if t.bound.is_some() {
                out.0 += 1;
            } else if t.unschedulable {
                out.1 += 1;
            }
        }
        out
    }

    /// When each bound pod of `keys` was seen bound.
    pub fn bind_times(&self, keys: &[String]) -> Vec<Instant> {
        let seen = self.seen.lock();
        keys.iter()
            .filter_map(|k| seen.pods.get(k).and_then(|t| t.bound))
            .collect()
    }

    /// From creation to bind, for each bound pod of `keys`.
    pub fn latencies(&self, keys: &[String]) -> Vec<Duration> {
        let seen = self.seen.lock();
        keys.iter()
            .filter_map(|k| seen.pods.get(k))
            .filter_map(|t| Some(t.bound?.saturating_duration_since(t.created?)))
            .collect()
    }

    /// Up to `count` pods of `namespace` with all of `labels`, by name.
    pub fn matching(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        count: Option<usize>,
    ) -> Vec<String> {
        let seen = self.seen.lock();
        let prefix = format!("{namespace}/");
        let mut keys: Vec<String> = seen
            .pods
            .iter()
            .filter(|(k, t)| {
                k.starts_with(&prefix) && labels.iter().all(|(l, v)| t.labels.get(l) == Some(v))
            })
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        if let Some(n) = count {
            keys.truncate(n);
        }
        keys
    }
}

impl Drop for PodTracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}
