//! DefaultBinder: binds a pod to its chosen node through the cluster client (the `binding`
//! subresource in cluster mode, the in-memory cluster in simulation).
//!
//! Bind only. It must not change the pod or the scheduler's cache itself: the binding cycle
//! does that once Bind succeeds, and a failed bind comes back as an Error status.

use kubesched_framework::model::PodInfo;
use kubesched_framework::{BindPlugin, CycleState, Handle, PluginError, Status, async_trait};

/// The plugin's registered name.
pub const NAME: &str = "DefaultBinder";

/// The DefaultBinder plugin.
#[derive(Debug, Clone)]
pub struct DefaultBinder {
    handle: Handle,
}

impl DefaultBinder {
    /// Builds the plugin around the handle whose client it binds with.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
        })
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
        match self.handle.client().bind(pod, node_name).await {
            Ok(()) => Status::success(),
            Err(e) => Status::error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::{ClientError, ClusterClient, Code, Event, PodStatusUpdate, registry};
    use kubesched_testing::{PodBuilder, StatusView};
    use std::sync::{Arc, Mutex};

    /// Records every bind; fails the ones whose pod name is in `fail`.
    #[derive(Default)]
    struct RecordingClient {
        binds: Mutex<Vec<(String, String)>>,
        fail: Vec<(String, ClientError)>,
    }

    #[async_trait]
    impl ClusterClient for RecordingClient {
        async fn bind(&self, pod: &PodInfo, node_name: &str) -> Result<(), ClientError> {
            self.binds
                .lock()
                .expect("lock")
                .push((pod.key(), node_name.to_string()));
            match self.fail.iter().find(|(name, _)| *name == pod.name) {
                Some((_, e)) => Err(e.clone()),
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

    fn client() -> Arc<RecordingClient> {
        Arc::new(RecordingClient {
            binds: Mutex::new(Vec::new()),
            fail: vec![
                ("gone".into(), ClientError::NotFound("pods \"gone\"".into())),
                (
                    "raced".into(),
                    ClientError::Conflict("pod raced is already assigned".into()),
                ),
                (
                    "broken".into(),
                    ClientError::Other("connection reset".into()),
                ),
            ],
        })
    }

    #[tokio::test]
    async fn bind_table() {
        // (pod, node, want code, want reason)
        let cases = [
            ("web", "n1", Code::Success, None),
            ("gone", "n1", Code::Error, Some("not found: pods \"gone\"")),
            (
                "raced",
                "n2",
                Code::Error,
                Some("conflict: pod raced is already assigned"),
            ),
            ("broken", "n3", Code::Error, Some("connection reset")),
        ];
        for (pod, node, code, reason) in cases {
            let client = client();
            let plugin = binder(client.clone());
            let status = plugin
                .bind(&CycleState::new(), &PodBuilder::new(pod).info(), node)
                .await;
            assert_eq!(status.code(), code, "{pod}");
            assert_eq!(
                status.reasons().first().map(String::as_str),
                reason,
                "{pod}"
            );
            assert_eq!(
                *client.binds.lock().expect("lock"),
                vec![(format!("default/{pod}"), node.to_string())],
                "{pod}: exactly one bind call"
            );
        }
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
            .binds
            .lock()
            .expect("lock")
            .iter()
            .map(|(pod, node)| format!("{pod} -> {node}"))
            .collect();
        insta::assert_yaml_snapshot!(BindSnapshot { runs, client_binds });
    }
}
