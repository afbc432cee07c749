//! [`KubeClient`]: the scheduler's writes through kube-rs — binding through the
//! `pods/binding` subresource, the `PodScheduled` condition and `nominatedNodeName` as a
//! strategic merge patch of the pod status, victim deletion, events, and the volume
//! bindings VolumeBinding's PreBind makes (PersistentVolume and claim updates).

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition,
    PodExtendedResourceClaimStatus, PodStatus,
};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
};
use kube::{Api, Client};
use kubesched_framework::model::PodInfo;
use kubesched_framework::{
    ClientError, ClusterClient, Event, ObjectKind, ObjectWrite, PodStatusUpdate,
};
use serde_json::{Map, Value, json};

use crate::events::EventRecorder;
use crate::watch::ObjectCache;

/// The condition type the scheduler owns.
pub const POD_SCHEDULED: &str = "PodScheduled";
/// The condition set on a preemption victim before it is deleted.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Its reason when the scheduler preempts.
pub const PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

/// How long a failed bind waits for the pod watcher to show the pod as the API has it.
const CATCH_UP_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// The kube-rs implementation of [`ClusterClient`].
#[derive(Clone)]
pub struct KubeClient {
    client: Client,
    pods: Arc<ObjectCache<Pod>>,
    events: EventRecorder,
    scheduler_name: String,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient")
            .field("scheduler_name", &self.scheduler_name)
            .finish_non_exhaustive()
    }
}

impl KubeClient {
    /// A client writing through `client`. `pods` is the pod watcher's view (the latest
    /// status to compute patches against); `scheduler_name` signs preemption conditions.
    pub fn new(
        client: Client,
        pods: Arc<ObjectCache<Pod>>,
        events: EventRecorder,
        scheduler_name: String,
    ) -> Self {
        Self {
            client,
            pods,
            events,
            scheduler_name,
        }
    }

    fn pods_api(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn claims_api(&self, namespace: &str) -> Api<ResourceClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The freshest copy of the pod: the watcher's when it is the same pod, else the one
    /// the scheduler had.
    fn latest(&self, pod: &PodInfo) -> Arc<Pod> {
        match self.pods.get(&format!("{}/{}", pod.namespace, pod.name)) {
            Some(p) if p.metadata.uid.as_deref().unwrap_or(&pod.uid) == pod.uid => p,
            _ => pod.pod.read(),
        }
    }

    /// Reads the pod from the API server and waits (bounded) until the watcher's copy
    /// shows that state, so the cache and the queue follow the API.
    async fn catch_up(&self, pod: &PodInfo) {
        let live = match self.pods_api(&pod.namespace).get_opt(&pod.name).await {
            Ok(live) => live,
            Err(e) => {
                tracing::debug!(pod = %pod.key(), error = %e, "reading the pod after a failed bind");
                return;
            }
        };
        let key = format!("{}/{}", pod.namespace, pod.name);
        let caught_up = |cached: Option<Arc<Pod>>| match (&live, cached) {
            (None, None) => true,
            (None, Some(c)) => c.metadata.uid.as_deref() != Some(pod.uid.as_str()),
            (Some(_), None) => false,
            (Some(l), Some(c)) => {
                c.metadata.resource_version == l.metadata.resource_version
                    || c.metadata.uid != l.metadata.uid
                    || c.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| !n.is_empty())
            }
        };
        let deadline = tokio::time::Instant::now() + CATCH_UP_BOUND;
        while !caught_up(self.pods.get(&key)) {
            if tokio::time::Instant::now() >= deadline {
                tracing::debug!(pod = %pod.key(), "the pod watcher did not catch up in time");
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    async fn patch_status(&self, pod: &PodInfo, status: Value) -> Result<(), ClientError> {
        let patch = json!({ "status": status });
        self.pods_api(&pod.namespace)
            .patch_status(
                &pod.name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
            .map(|_| ())
            .map_err(|e| client_error(e, &format!("patching the status of pod {}", pod.key())))
    }
}

/// Maps a kube error to the scheduler's: 409 is a conflict, 404 not found; 500, 503 and a
/// refused connection are transient (upstream's `Retriable`).
pub fn client_error(e: kube::Error, doing: &str) -> ClientError {
    match e {
        kube::Error::Api(s) if s.code == 409 => ClientError::Conflict(s.message),
        kube::Error::Api(s) if s.code == 404 => ClientError::NotFound(s.message),
        kube::Error::Api(s) if s.code == 500 || s.code == 503 => {
            ClientError::Transient(format!("{doing}: {} ({})", s.message, s.code))
        }
        kube::Error::Api(s) => ClientError::Other(format!("{doing}: {} ({})", s.message, s.code)),
        other if connection_refused(&other) => ClientError::Transient(format!("{doing}: {other}")),
        other => ClientError::Other(format!("{doing}: {other}")),
    }
}

/// Whether the error comes from a refused TCP connection, anywhere in its causes (as Go's
/// `net.IsConnectionRefused` looks through wrapped errors).
fn connection_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

fn claim_name(claim: &ResourceClaim) -> (&str, &str) {
    (
        claim.metadata.namespace.as_deref().unwrap_or("default"),
        claim.metadata.name.as_deref().unwrap_or(""),
    )
}

/// The condition as upstream's UpdatePodCondition would leave it, and whether anything
/// changed: the transition time moves only when the status changes.
pub fn merged_condition(
    current: Option<&PodStatus>,
    mut wanted: PodCondition,
    now: Timestamp,
) -> Option<PodCondition> {
    let existing = current
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == wanted.type_));
    match existing {
        None => {
            wanted.last_transition_time = Some(Time(now));
            Some(wanted)
        }
        Some(old) => {
            wanted.last_transition_time = if old.status == wanted.status {
                old.last_transition_time.clone()
            } else {
                Some(Time(now))
            };
            let same = old.status == wanted.status
                && old.reason == wanted.reason
                && old.message == wanted.message
                && old.last_probe_time == wanted.last_probe_time
                && old.last_transition_time == wanted.last_transition_time
                && (wanted.observed_generation.is_none()
                    || old.observed_generation == wanted.observed_generation);
            (!same).then_some(wanted)
        }
    }
}

/// The status patch for `update` against the pod's current status; None when it would
/// change nothing. The nomination is compared with `known_nomination`, the scheduler's
/// own view of it, as upstream's PatchPodStatus diffs against the pod it holds: a
/// nomination the scheduler just wrote (before WaitOnPermit) may not be in the informer's
/// copy yet, and clearing it must not be skipped for that.
pub fn status_patch(
    pod: &Pod,
    known_nomination: Option<&str>,
    update: &PodStatusUpdate,
    now: Timestamp,
) -> Option<Value> {
    let mut patch = Map::new();
    if let Some(c) = &update.condition {
        let wanted = PodCondition {
            type_: POD_SCHEDULED.to_string(),
            status: c.status.clone(),
            reason: Some(c.reason.clone()),
            message: Some(c.message.clone()),
            observed_generation: pod.metadata.generation,
            ..Default::default()
        };
        if let Some(cond) = merged_condition(pod.status.as_ref(), wanted, now) {
            let mut v = serde_json::to_value(&cond).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                // Explicit, as upstream's patch carries it.
                m.entry("lastProbeTime").or_insert(Value::Null);
            }
            patch.insert("conditions".into(), Value::Array(vec![v]));
        }
    }
    if let Some(nominated) = &update.nominated_node_name {
        let current = known_nomination.filter(|n| !n.is_empty());
        let wanted = nominated.as_deref().filter(|n| !n.is_empty());
        if current != wanted {
            patch.insert(
                "nominatedNodeName".into(),
                wanted.map_or(Value::Null, |n| Value::String(n.to_string())),
            );
        }
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

#[async_trait]
impl ClusterClient for KubeClient {
    async fn bind(&self, pod: &PodInfo, node_name: &str) -> Result<(), ClientError> {
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(pod.name.clone()),
                namespace: Some(pod.namespace.clone()),
                uid: Some(pod.uid.clone()).filter(|u| !u.is_empty() && *u != pod.key()),
                ..Default::default()
            },
            target: ObjectReference {
                kind: Some("Node".into()),
                name: Some(node_name.to_string()),
                ..Default::default()
            },
        };
        let result = self
            .pods_api(&pod.namespace)
            .create_subresource::<Binding, Value>(
                "binding",
                &pod.name,
                &PostParams::default(),
                &binding,
            )
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) => {
                let stale = matches!(&e, kube::Error::Api(s) if s.code == 409 || s.code == 404);
                let err =
                    client_error(e, &format!("binding pod {} to node {node_name}", pod.key()));
                if stale {
                    // The pod is bound elsewhere, replaced or gone: let the watcher catch up
                    // so the failure is handled against the pod as the API has it now.
                    self.catch_up(pod).await;
                }
                Err(err)
            }
        }
    }

    async fn delete_pod(&self, pod: &PodInfo) -> Result<(), ClientError> {
        // As upstream: mark the victim with a DisruptionTarget condition, then delete it.
        let latest = self.latest(pod);
        let wanted = PodCondition {
            type_: DISRUPTION_TARGET.to_string(),
            status: "True".into(),
            reason: Some(PREEMPTION_BY_SCHEDULER.into()),
            message: Some(format!(
                "{}: preempting to accommodate a higher priority pod",
                self.scheduler_name
            )),
            ..Default::default()
        };
        if let Some(cond) = merged_condition(latest.status.as_ref(), wanted, Timestamp::now()) {
            let cond = serde_json::to_value(&cond).unwrap_or(Value::Null);
            self.patch_status(pod, json!({ "conditions": [cond] }))
                .await?;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(pod.uid.clone()).filter(|u| !u.is_empty() && *u != pod.key()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self
            .pods_api(&pod.namespace)
            .delete(&pod.name, &params)
            .await
        {
            Ok(_) => Ok(()),
            // The UID precondition failed: the victim is gone and another pod has its name.
            Err(kube::Error::Api(s)) if s.code == 409 => Err(ClientError::NotFound(s.message)),
            Err(e) => Err(client_error(e, &format!("deleting pod {}", pod.key()))),
        }
    }

    async fn update_pod_status(
        &self,
        pod: &PodInfo,
        update: &PodStatusUpdate,
    ) -> Result<(), ClientError> {
        let latest = self.latest(pod);
        let patch = status_patch(
            &latest,
            pod.nominated_node_name.as_deref(),
            update,
            Timestamp::now(),
        );
        match patch {
            Some(patch) => self.patch_status(pod, patch).await,
            None => Ok(()),
        }
    }

    async fn get_resource_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ResourceClaim, ClientError> {
        self.claims_api(namespace)
            .get(name)
            .await
            .map_err(|e| client_error(e, &format!("reading ResourceClaim {namespace}/{name}")))
    }

    async fn update_resource_claim(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let (ns, name) = claim_name(claim);
        self.claims_api(ns)
            .replace(name, &PostParams::default(), claim)
            .await
            .map_err(|e| client_error(e, &format!("updating ResourceClaim {ns}/{name}")))
    }

    async fn update_resource_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let (ns, name) = claim_name(claim);
        self.claims_api(ns)
            .replace_status(name, &PostParams::default(), claim)
            .await
            .map_err(|e| client_error(e, &format!("updating ResourceClaim {ns}/{name} status")))
    }

    async fn create_resource_claim(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let (ns, _) = claim_name(claim);
        let what = claim
            .metadata
            .name
            .clone()
            .or_else(|| claim.metadata.generate_name.clone())
            .unwrap_or_default();
        self.claims_api(ns)
            .create(&PostParams::default(), claim)
            .await
            .map_err(|e| client_error(e, &format!("creating ResourceClaim {ns}/{what}")))
    }

    async fn delete_resource_claim(&self, namespace: &str, name: &str) -> Result<(), ClientError> {
        self.claims_api(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
            .map_err(|e| client_error(e, &format!("deleting ResourceClaim {namespace}/{name}")))
    }

    async fn patch_pod_extended_resource_claim_status(
        &self,
        pod: &PodInfo,
        status: &PodExtendedResourceClaimStatus,
    ) -> Result<(), ClientError> {
        let status = serde_json::to_value(status).map_err(|e| {
            ClientError::Other(format!(
                "encoding status.extendedResourceClaimStatus of pod {}: {e}",
                pod.key()
            ))
        })?;
        self.patch_status(pod, json!({ "extendedResourceClaimStatus": status }))
            .await
    }

    async fn remove_resource_claim_reservation(
        &self,
        claim: &ResourceClaim,
        pod_uid: &str,
    ) -> Result<(), ClientError> {
        let (ns, name) = claim_name(claim);
        // As upstream: a strategic merge patch deleting one reservedFor entry by UID, with
        // the claim's UID as precondition and no resourceVersion.
        let patch = json!({
            "metadata": {"uid": claim.metadata.uid},
            "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]},
        });
        self.claims_api(ns)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(|_| ())
            .map_err(|e| client_error(e, &format!("unreserving ResourceClaim {ns}/{name}")))
    }

    fn record_event(&self, event: Event) {
        self.events.record(event);
    }

    async fn update_persistent_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<PersistentVolume, ClientError> {
        let name = pv.metadata.name.as_deref().unwrap_or_default();
        Api::<PersistentVolume>::all(self.client.clone())
            .replace(name, &PostParams::default(), pv)
            .await
            .map_err(|e| client_error(e, &format!("updating PersistentVolume {name}")))
    }

    async fn update_persistent_volume_claim(
        &self,
        pvc: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, ClientError> {
        let ns = pvc.metadata.namespace.as_deref().unwrap_or_default();
        let name = pvc.metadata.name.as_deref().unwrap_or_default();
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns)
            .replace(name, &PostParams::default(), pvc)
            .await
            .map_err(|e| client_error(e, &format!("updating PersistentVolumeClaim {ns}/{name}")))
    }

    async fn write_object(
        &self,
        kind: &ObjectKind,
        write: &ObjectWrite,
    ) -> Result<Value, ClientError> {
        let resource = ApiResource {
            group: kind.group.to_string(),
            version: kind.version.to_string(),
            api_version: kind.api_version(),
            kind: kind.kind.to_string(),
            plural: kind.plural.to_string(),
        };
        let api = |namespace: Option<&str>| -> Api<DynamicObject> {
            match namespace {
                Some(ns) if kind.namespaced => {
                    Api::namespaced_with(self.client.clone(), ns, &resource)
                }
                _ => Api::all_with(self.client.clone(), &resource),
            }
        };
        let decode = |v: &Value| {
            serde_json::from_value::<DynamicObject>(v.clone())
                .map_err(|e| ClientError::Other(format!("encoding a {}: {e}", kind.kind)))
        };
        let what = |verb: &str, name: &str| format!("{verb} {} {name}", kind.resource());
        let stored = match write {
            ObjectWrite::Create { object } => {
                let obj = decode(object)?;
                let ns = obj.metadata.namespace.clone();
                let name = obj.metadata.name.clone().unwrap_or_default();
                api(ns.as_deref())
                    .create(&PostParams::default(), &obj)
                    .await
                    .map_err(|e| client_error(e, &what("creating", &name)))?
            }
            ObjectWrite::ReplaceStatus {
                namespace,
                name,
                object,
            } => api(namespace.as_deref())
                .replace_status(name, &PostParams::default(), &decode(object)?)
                .await
                .map_err(|e| client_error(e, &what("replacing the status of", name)))?,
            ObjectWrite::PatchStatus {
                namespace,
                name,
                patch,
            } => api(namespace.as_deref())
                .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(|e| client_error(e, &what("patching the status of", name)))?,
        };
        let mut v = serde_json::to_value(&stored)
            .map_err(|e| ClientError::Other(format!("decoding a {}: {e}", kind.kind)))?;
        v["apiVersion"] = kind.api_version().into();
        v["kind"] = kind.kind.into();
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::PodScheduledCondition;

    fn pod_with(status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "c"}]},
            "status": status,
        }))
        .expect("pod")
    }

    fn unschedulable(message: &str) -> PodStatusUpdate {
        PodStatusUpdate {
            condition: Some(PodScheduledCondition {
                status: "False".into(),
                reason: "Unschedulable".into(),
                message: message.into(),
            }),
            nominated_node_name: None,
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn first_condition_gets_a_transition_time() {
        let pod = pod_with(json!({"phase": "Pending"}));
        let patch = status_patch(
            &pod,
            None,
            &unschedulable("0/1 nodes are available"),
            ts("2024-01-01T00:00:00Z"),
        )
        .expect("patch");
        assert_eq!(
            patch,
            json!({"conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available", "lastProbeTime": null,
                "lastTransitionTime": "2024-01-01T00:00:00Z"
            }]})
        );
    }

    #[test]
    fn the_same_condition_again_is_no_patch() {
        let pod = pod_with(json!({"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "m", "lastTransitionTime": "2024-01-01T00:00:00Z"
        }]}));
        assert_eq!(
            status_patch(&pod, None, &unschedulable("m"), ts("2024-01-02T00:00:00Z")),
            None
        );
        // A new message keeps the transition time (the status did not change).
        let patch = status_patch(&pod, None, &unschedulable("m2"), ts("2024-01-02T00:00:00Z"))
            .expect("patch");
        assert_eq!(
            patch["conditions"][0]["lastTransitionTime"],
            "2024-01-01T00:00:00Z"
        );
        assert_eq!(patch["conditions"][0]["message"], "m2");
    }

    #[test]
    fn nominated_node_is_set_and_cleared_only_when_it_changes() {
        let pod = pod_with(json!({"nominatedNodeName": "n1"}));
        let set = |n: Option<&str>| PodStatusUpdate {
            condition: None,
            nominated_node_name: Some(n.map(str::to_string)),
        };
        let now = ts("2024-01-01T00:00:00Z");
        let n1 = Some("n1");
        assert_eq!(status_patch(&pod, n1, &set(Some("n1")), now), None);
        assert_eq!(
            status_patch(&pod, n1, &set(Some("n2")), now),
            Some(json!({"nominatedNodeName": "n2"}))
        );
        assert_eq!(
            status_patch(&pod, n1, &set(None), now),
            Some(json!({"nominatedNodeName": null}))
        );
        let bare = pod_with(json!({}));
        assert_eq!(status_patch(&bare, None, &set(None), now), None);
        assert_eq!(
            status_patch(&bare, None, &PodStatusUpdate::default(), now),
            None
        );
        // The scheduler wrote n1 a moment ago and the informer has not seen it: the
        // clearing is still sent (a failed gang kept its room before).
        assert_eq!(
            status_patch(&bare, n1, &set(None), now),
            Some(json!({"nominatedNodeName": null}))
        );
    }

    #[test]
    fn errors_map_by_status_code() {
        let api = |code: u16| {
            kube::Error::Api(
                kube::core::Status {
                    code,
                    message: format!("m{code}"),
                    ..Default::default()
                }
                .boxed(),
            )
        };
        assert_eq!(
            client_error(api(409), "x"),
            ClientError::Conflict("m409".into())
        );
        assert_eq!(
            client_error(api(404), "x"),
            ClientError::NotFound("m404".into())
        );
        assert_eq!(
            client_error(api(500), "binding"),
            ClientError::Transient("binding: m500 (500)".into())
        );
        assert_eq!(
            client_error(api(503), "binding"),
            ClientError::Transient("binding: m503 (503)".into())
        );
        // Neither a throttled request nor a refused permission is upstream's transient kind.
        for code in [429, 403, 422, 502] {
            assert!(
                matches!(client_error(api(code), "binding"), ClientError::Other(_)),
                "{code}"
            );
        }
    }

    #[test]
    fn a_refused_connection_is_transient() {
        let refused = kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        )));
        assert!(client_error(refused, "binding").is_transient());
        let reset = kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset",
        )));
        assert!(!client_error(reset, "binding").is_transient());
        // Wrapped one level down, as hyper's connector reports it.
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Wrapper(#[source] std::io::Error);
        let wrapped = kube::Error::Service(Box::new(Wrapper(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "tcp connect error",
        ))));
        assert!(client_error(wrapped, "binding").is_transient());
    }
}
