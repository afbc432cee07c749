//! DefaultBinder: binds a pod to its chosen node through the cluster client (the `binding`
//! subresource in cluster mode, the in-memory cluster in simulation).
//!
//! Bind only. It must not change the pod or the scheduler's cache itself: the binding cycle
//! does that once Bind succeeds, and a failed bind comes back as an Error status.
//!
//! As upstream v1.37 (kubernetes#138855), a binding that fails with a transient error
//! (HTTP 500 or 503, or a refused connection: [`ClientError::is_transient`]) is sent again
//! within the same Bind call, with client-go's `retry.DefaultBackoff`: four attempts in
//! all, 10 ms before the second, then five times longer each time, each wait stretched by
//! up to a tenth at random. A conflict (the pod is bound already, or was replaced), a
//! missing pod or node, and any other answer end the call at once.

use std::time::Duration;

use kubesched_framework::model::PodInfo;
use kubesched_framework::{
    BindPlugin, ClientError, CycleState, Handle, PluginError, Status, async_trait,
};

/// The plugin's registered name.
pub const NAME: &str = "DefaultBinder";

/// How a binding is retried after a transient error (client-go's `retry.DefaultBackoff`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BindBackoff {
    /// Calls in all, the first included.
    pub attempts: u32,
    /// The wait before the second call.
    pub first_wait: Duration,
    /// How much longer each following wait is.
    pub factor: f64,
    /// Each wait is stretched by up to this share of it, at random.
    pub jitter: f64,
}

impl Default for BindBackoff {
    fn default() -> Self {
        Self {
            attempts: 4,
            first_wait: Duration::from_millis(10),
            factor: 5.0,
            jitter: 0.1,
        }
    }
}

impl BindBackoff {
    /// The wait after the `failed`-th failed call (1-based), before the jitter.
    pub fn wait_after(&self, failed: u32) -> Duration {
        let exponent = i32::try_from(failed.saturating_sub(1)).unwrap_or(i32::MAX);
        self.first_wait.mul_f64(self.factor.powi(exponent))
    }

    fn jittered(&self, wait: Duration) -> Duration {
        if self.jitter > 0.0 {
            wait + wait.mul_f64(self.jitter * fastrand::f64())
        } else {
            wait
        }
    }
}

/// The DefaultBinder plugin.
#[derive(Debug, Clone)]
pub struct DefaultBinder {
    handle: Handle,
    backoff: BindBackoff,
}

impl DefaultBinder {
    /// Builds the plugin around the handle whose client it binds with.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self::with_backoff(handle, BindBackoff::default()))
    }

    /// The plugin with another retry policy (tests, embedders).
    pub fn with_backoff(handle: &Handle, backoff: BindBackoff) -> Self {
        Self {
            handle: handle.clone(),
            backoff,
        }
    }

    /// Sends the binding, again after a transient error until the attempts run out; the
    /// last error otherwise.
    async fn bind_with_retries(&self, pod: &PodInfo, node_name: &str) -> Result<(), ClientError> {
        let attempts = self.backoff.attempts.max(1);
        let mut failed = 0;
        loop {
            match self.handle.client().bind(pod, node_name).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_transient() && failed + 1 < attempts => {
                    failed += 1;
                    let wait = self.backoff.jittered(self.backoff.wait_after(failed));
                    tracing::debug!(pod = %pod.key(), node = node_name, attempt = failed, error = %e, ?wait, "binding failed with a transient error; retrying");
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: DefaultBinder,
    factory: DefaultBinder::new,
}

#[async_trait]
impl BindPlugin for DefaultBinder {
    async fn bind(&self, _state: &CycleState, pod: &PodInfo, node_name: &str) -> Status {
        tracing::debug!(pod = %pod.key(), node = node_name, "attempting to bind pod to node");
        match self.bind_with_retries(pod, node_name).await {
            Ok(()) => Status::success(),
            Err(e) => Status::error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::{ClusterClient, Code, Event, PodStatusUpdate, registry};
    use kubesched_testing::{PodBuilder, StatusView};
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;

    /// Records every bind and when it came; answers each pod's calls from its script (the
    /// first call gets the first answer, and the last answer repeats), success otherwise.
    #[derive(Default)]
    struct RecordingClient {
        binds: Mutex<Vec<(String, String, Instant)>>,
        script: Vec<(String, Vec<Result<(), ClientError>>)>,
    }

    impl RecordingClient {
        fn calls(&self) -> Vec<(String, String)> {
            self.binds
                .lock()
                .expect("lock")
                .iter()
                .map(|(p, n, _)| (p.clone(), n.clone()))
                .collect()
        }

        /// The time between consecutive binds.
        fn waits(&self) -> Vec<Duration> {
            let binds = self.binds.lock().expect("lock");
            binds.windows(2).map(|w| w[1].2 - w[0].2).collect()
        }
    }

    #[async_trait]
    impl ClusterClient for RecordingClient {
        async fn bind(&self, pod: &PodInfo, node_name: &str) -> Result<(), ClientError> {
            let call = {
                let mut binds = self.binds.lock().expect("lock");
                binds.push((pod.key(), node_name.to_string(), Instant::now()));
                binds.iter().filter(|(k, _, _)| *k == pod.key()).count()
            };
            match self.script.iter().find(|(name, _)| *name == pod.name) {
                Some((_, answers)) => answers
                    .get(call - 1)
                    .or(answers.last())
                    .cloned()
                    .unwrap_or(Ok(())),
                None => Ok(()),
            }
        }
        async fn delete_pod(&self, _: &PodInfo) -> Result<(), ClientError> {
            Ok(())
        }
        async fn update_pod_status(
            &self,
            _: &PodInfo,
            _: &PodStatusUpdate,
        ) -> Result<(), ClientError> {
            Ok(())
        }
        fn record_event(&self, _: Event) {}
        async fn update_persistent_volume(
            &self,
            pv: &kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolume,
        ) -> Result<
            kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolume,
            ClientError,
        > {
            Ok(pv.clone())
        }
        async fn update_persistent_volume_claim(
            &self,
            pvc: &kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolumeClaim,
        ) -> Result<
            kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolumeClaim,
            ClientError,
        > {
            Ok(pvc.clone())
        }
    }

    fn binder(client: Arc<RecordingClient>) -> DefaultBinder {
        let handle = Handle::builder().client(client).build();
        DefaultBinder::new(&handle).expect("builds")
    }

    fn unavailable() -> Result<(), ClientError> {
        Err(ClientError::Transient(
            "binding pod: etcdserver: leader changed (500)".into(),
        ))
    }

    fn client() -> Arc<RecordingClient> {
        let always = |e: ClientError| vec![Err(e)];
        Arc::new(RecordingClient {
            binds: Mutex::new(Vec::new()),
            script: vec![
                (
                    "gone".into(),
                    always(ClientError::NotFound("pods \"gone\"".into())),
                ),
                (
                    "raced".into(),
                    always(ClientError::Conflict(
                        "pod raced is already assigned".into(),
                    )),
                ),
                (
                    "broken".into(),
                    always(ClientError::Other("connection reset".into())),
                ),
                ("blip".into(), vec![unavailable(), Ok(())]),
                (
                    "shaky".into(),
                    vec![unavailable(), unavailable(), unavailable(), Ok(())],
                ),
                ("down".into(), vec![unavailable()]),
                (
                    "taken".into(),
                    vec![
                        unavailable(),
                        Err(ClientError::Conflict(
                            "pod taken is already assigned to node \"n9\"".into(),
                        )),
                    ],
                ),
            ],
        })
    }

    /// The jitter-free waits of the default backoff between `n` calls.
    fn waits(n: usize) -> Vec<Duration> {
        let b = BindBackoff::default();
        (1..n).map(|i| b.wait_after(i as u32)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn bind_table() {
        // (pod, want code, want reason, want calls)
        let cases = [
            ("web", Code::Success, None, 1),
            ("gone", Code::Error, Some("not found: pods \"gone\""), 1),
            (
                "raced",
                Code::Error,
                Some("conflict: pod raced is already assigned"),
                1,
            ),
            ("broken", Code::Error, Some("connection reset"), 1),
            // Transient errors are retried within the call (v1.37, kubernetes#138855).
            ("blip", Code::Success, None, 2),
            ("shaky", Code::Success, None, 4),
            (
                "down",
                Code::Error,
                Some("binding pod: etcdserver: leader changed (500)"),
                4,
            ),
            (
                "taken",
                Code::Error,
                Some("conflict: pod taken is already assigned to node \"n9\""),
                2,
            ),
        ];
        for (pod, code, reason, calls) in cases {
            let client = client();
            let plugin = binder(client.clone());
            let status = plugin
                .bind(&CycleState::new(), &PodBuilder::new(pod).info(), "n1")
                .await;
            assert_eq!(status.code(), code, "{pod}");
            assert_eq!(
                status.reasons().first().map(String::as_str),
                reason,
                "{pod}"
            );
            assert_eq!(
                client.calls(),
                vec![(format!("default/{pod}"), "n1".to_string()); calls],
                "{pod}: bind calls"
            );
            // Each wait is the backoff's, stretched by less than its jitter.
            let got = client.waits();
            let want = waits(calls);
            assert_eq!(got.len(), want.len(), "{pod}");
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    *g >= *w && *g <= w.mul_f64(1.1),
                    "{pod}: waited {g:?}, backoff {w:?}"
                );
            }
        }
    }

    #[test]
    fn the_default_backoff_is_client_gos() {
        let b = BindBackoff::default();
        assert_eq!(b.attempts, 4);
        assert_eq!(
            waits(4),
            [10, 50, 250].map(Duration::from_millis).to_vec(),
            "10 ms, then five times longer each time"
        );
        assert!((b.jitter - 0.1).abs() < f64::EPSILON);
    }

    #[tokio::test(start_paused = true)]
    async fn a_single_attempt_policy_never_retries() {
        let client = client();
        let handle = Handle::builder().client(client.clone()).build();
        let plugin = DefaultBinder::with_backoff(
            &handle,
            BindBackoff {
                attempts: 1,
                ..BindBackoff::default()
            },
        );
        let status = plugin
            .bind(&CycleState::new(), &PodBuilder::new("blip").info(), "n1")
            .await;
        assert_eq!(status.code(), Code::Error);
        assert_eq!(client.calls().len(), 1);
    }

    #[tokio::test]
    async fn error_keeps_the_client_cause() {
        let plugin = binder(client());
        let status = plugin
            .bind(&CycleState::new(), &PodBuilder::new("broken").info(), "n1")
            .await;
        assert_eq!(status.cause(), Some("connection reset"));
    }

    #[test]
    fn registered_with_its_points() {
        let desc = registry::find(NAME).expect("registered");
        let plugin = binder(Arc::new(RecordingClient::default()));
        assert_eq!(
            desc.extension_points().to_vec(),
            kubesched_framework::implemented_points(&plugin).as_slice()
        );
    }

    #[derive(serde::Serialize)]
    struct BindRun {
        pod: String,
        node: String,
        status: StatusView,
    }

    #[derive(serde::Serialize)]
    struct BindSnapshot {
        runs: Vec<BindRun>,
        client_binds: Vec<String>,
    }

    #[tokio::test]
    async fn snapshot() {
        let client = client();
        let plugin = binder(client.clone());
        let mut runs = Vec::new();
        for (pod, node) in [("web", "n1"), ("raced", "n2"), ("gone", "n3")] {
            let status = plugin
                .bind(&CycleState::new(), &PodBuilder::new(pod).info(), node)
                .await;
            runs.push(BindRun {
                pod: pod.to_string(),
                node: node.to_string(),
                status: (&status).into(),
            });
        }
        let client_binds: Vec<String> = client
            .calls()
            .iter()
            .map(|(pod, node)| format!("{pod} -> {node}"))
            .collect();
        insta::assert_yaml_snapshot!(BindSnapshot { runs, client_binds });
    }
}
