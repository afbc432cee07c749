//! Events through events.k8s.io/v1, recorded without blocking the caller and aggregated
//! like client-go's event broadcaster: the first occurrence of an event is created; a
//! repeat (same object, action, reason, note and reporter) turns it into a series whose
//! count is patched at once on the second occurrence and then only periodically, so a pod
//! that keeps failing does not flood the API server.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as ApiEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubesched_framework::{Event, EventType, ObjectRef};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Timings of the recorder (upstream's values by default).
#[derive(Debug, Clone)]
pub struct EventSettings {
    /// How often series that grew since their last write are patched (30 min).
    pub refresh_interval: Duration,
    /// A series not seen for this long is forgotten; the next occurrence starts a new
    /// event (6 min).
    pub finish_after: Duration,
    /// Wait between tries of a failed write (10 s).
    pub retry_interval: Duration,
    /// Tries per write (12).
    pub max_tries: u32,
    /// Events waiting to be written beyond this are dropped (1000).
    pub queue_len: usize,
}

impl Default for EventSettings {
    fn default() -> Self {
        Self {
            refresh_interval: Duration::from_secs(30 * 60),
            finish_after: Duration::from_secs(6 * 60),
            retry_interval: Duration::from_secs(10),
            max_tries: 12,
            queue_len: 1000,
        }
    }
}

/// Names the controller that reports an event about an object (the scheduler name of
/// the profile responsible for it).
pub type ControllerOf = Arc<dyn Fn(&ObjectRef) -> String + Send + Sync>;

/// Sends events to the background writer; cheap to clone, never blocks.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Command>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder").finish_non_exhaustive()
    }
}

enum Command {
    // Boxed: an event is much larger than a flush request.
    Record(Box<Event>),
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl EventRecorder {
    /// Starts the writer task. `instance` is the reporting instance's suffix (the host).
    pub fn start(
        client: Client,
        controller_of: ControllerOf,
        host: String,
        settings: EventSettings,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(settings.queue_len.max(1));
        let writer = Writer {
            client,
            controller_of,
            host,
            settings,
            cache: HashMap::new(),
            writes: JoinSet::new(),
        };
        let task = tokio::spawn(writer.run(rx));
        (Self { tx }, task)
    }

    /// Queues an event; drops it (with a warning) when the queue is full.
    pub fn record(&self, event: Event) {
        match self.tx.try_send(Command::Record(Box::new(event))) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!("event queue is full; dropping an event");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::debug!("event recorder stopped; dropping an event");
            }
        }
    }

    /// Waits (at most `bound`) until every event queued so far has been written or given up.
    pub async fn flush(&self, bound: Duration) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(Command::Flush(tx)).await.is_ok() {
            let _ = tokio::time::timeout(bound, rx).await;
        }
    }
}

/// What makes two events the same occurrence (client-go's eventKey).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    regarding: (String, String, String, String),
    action: String,
    reason: String,
    note: String,
    controller: String,
}

struct Entry {
    event: ApiEvent,
    count: i32,
    last_observed: Timestamp,
    last_seen: Instant,
    dirty: bool,
}

struct Writer {
    client: Client,
    controller_of: ControllerOf,
    host: String,
    settings: EventSettings,
    cache: HashMap<Key, Entry>,
    writes: JoinSet<()>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut refresh = tokio::time::interval(self.settings.refresh_interval);
        let mut finish = tokio::time::interval(self.settings.finish_after);
        refresh.tick().await;
        finish.tick().await;
        loop {
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(Command::Record(e)) => self.on_event(*e),
                    Some(Command::Flush(done)) => {
                        while self.writes.join_next().await.is_some() {}
                        let _ = done.send(());
                    }
                    None => break,
                },
                _ = refresh.tick() => self.refresh(),
                _ = finish.tick() => self.finish(),
                Some(_) = self.writes.join_next(), if !self.writes.is_empty() => {}
            }
        }
        while self.writes.join_next().await.is_some() {}
    }

    fn on_event(&mut self, e: Event) {
        let controller = (self.controller_of)(&e.regarding);
        let key = Key {
            regarding: (
                e.regarding.kind.clone(),
                e.regarding.namespace.clone(),
                e.regarding.name.clone(),
                e.regarding.uid.clone(),
            ),
            action: e.action.clone(),
            reason: e.reason.clone(),
            note: e.note.clone(),
            controller: controller.clone(),
        };
        let now = Timestamp::now();
        if let Some(entry) = self.cache.get_mut(&key) {
            entry.count += 1;
            entry.last_observed = now;
            entry.last_seen = Instant::now();
            if entry.count == 2 {
                // The second occurrence starts the series and is written at once; later
                // ones only bump the count until the next refresh.
                let ev = with_series(&entry.event, entry.count, now);
                self.spawn_write(ev, true);
            } else {
                entry.dirty = true;
            }
            return;
        }
        let event = self.build(&e, controller, now);
        self.cache.insert(
            key,
            Entry {
                event: event.clone(),
                count: 1,
                last_observed: now,
                last_seen: Instant::now(),
                dirty: false,
            },
        );
        self.spawn_write(event, false);
    }

    fn build(&self, e: &Event, controller: String, now: Timestamp) -> ApiEvent {
        let namespace = if e.regarding.namespace.is_empty() {
            "default".to_string()
        } else {
            e.regarding.namespace.clone()
        };
        let nanos = now.as_nanosecond();
        ApiEvent {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", e.regarding.name, nanos)),
                namespace: Some(namespace),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(e.action.clone()),
            reason: Some(e.reason.clone()),
            note: Some(e.note.clone()),
            type_: Some(
                match e.event_type {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            regarding: Some(object_reference(&e.regarding)),
            related: e.related.as_ref().map(object_reference),
            reporting_instance: Some(format!("{controller}-{}", self.host)),
            reporting_controller: Some(controller),
            ..Default::default()
        }
    }

    /// Patches every series that grew since it was last written.
    fn refresh(&mut self) {
        let mut due = Vec::new();
        for entry in self.cache.values_mut() {
            if entry.dirty {
                entry.dirty = false;
                due.push(with_series(&entry.event, entry.count, entry.last_observed));
            }
        }
        for ev in due {
            self.spawn_write(ev, true);
        }
    }

    /// Forgets series that have not been seen for a while (writing their last count).
    fn finish(&mut self) {
        let limit = self.settings.finish_after;
        let mut last_writes = Vec::new();
        self.cache.retain(|_, e| {
            let keep = e.last_seen.elapsed() < limit;
            if !keep && e.dirty {
                last_writes.push(with_series(&e.event, e.count, e.last_observed));
            }
            keep
        });
        for ev in last_writes {
            self.spawn_write(ev, true);
        }
    }

    fn spawn_write(&mut self, event: ApiEvent, series: bool) {
        let client = self.client.clone();
        let settings = self.settings.clone();
        self.writes.spawn(async move {
            write_with_retries(client, event, series, &settings).await;
        });
    }
}

fn with_series(event: &ApiEvent, count: i32, last: Timestamp) -> ApiEvent {
    let mut ev = event.clone();
    ev.series = Some(EventSeries {
        count,
        last_observed_time: MicroTime(last),
    });
    ev
}

fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        _ => true,
    }
}

async fn write_with_retries(client: Client, event: ApiEvent, series: bool, s: &EventSettings) {
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    let name = event.metadata.name.clone().unwrap_or_default();
    let api: Api<ApiEvent> = Api::namespaced(client, &namespace);
    for attempt in 1..=s.max_tries.max(1) {
        let result = write_once(&api, &event, series).await;
        match result {
            Ok(()) => return,
            Err(e) if !retryable(&e) => {
                tracing::warn!(event = %name, namespace = %namespace, error = %e, "event rejected; not retrying");
                return;
            }
            Err(e) => {
                tracing::debug!(event = %name, attempt, error = %e, "writing event failed");
                if attempt == s.max_tries {
                    tracing::warn!(event = %name, namespace = %namespace, error = %e, "giving up writing event");
                    return;
                }
                // Spread the first retry so writers that failed together do not retry together.
                let wait = if attempt == 1 {
                    s.retry_interval.mul_f64(fastrand::f64())
                } else {
                    s.retry_interval
                };
                tokio::time::sleep(wait).await;
            }
        }
    }
}

async fn write_once(
    api: &Api<ApiEvent>,
    event: &ApiEvent,
    series: bool,
) -> Result<(), kube::Error> {
    let name = event.metadata.name.clone().unwrap_or_default();
    if series {
        let patch = serde_json::json!({ "series": event.series });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            // The first event may have been removed (TTL): create it again with its series.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let mut ev = event.clone();
    ev.metadata.resource_version = None;
    match api.create(&PostParams::default(), &ev).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

fn object_reference(r: &ObjectRef) -> ObjectReference {
    ObjectReference {
        // Pods and nodes, the only objects the scheduler reports on, are core/v1.
        api_version: matches!(r.kind.as_str(), "Pod" | "Node").then(|| "v1".to_string()),
        kind: Some(r.kind.clone()),
        namespace: Some(r.namespace.clone()).filter(|n| !n.is_empty()),
        name: Some(r.name.clone()),
        uid: Some(r.uid.clone()).filter(|u| !u.is_empty()),
        ..Default::default()
    }
}
