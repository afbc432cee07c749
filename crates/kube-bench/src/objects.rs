//! What the driver creates besides nodes and pods, and the record of everything it
//! created so it can all be deleted at the end.

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kubesched_sim::{Op, Workload};

/// A kind `createObjects` may hold: where the API serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicKind {
    kind: &'static str,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    namespaced: bool,
}

const fn kind(
    kind: &'static str,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> DynamicKind {
    DynamicKind {
        kind,
        group,
        version,
        plural,
        namespaced,
    }
}

/// The kinds the workloads create and the scheduler reads.
const KINDS: &[DynamicKind] = &[
    kind("Namespace", "", "v1", "namespaces", false),
    kind("Service", "", "v1", "services", true),
    kind(
        "ReplicationController",
        "",
        "v1",
        "replicationcontrollers",
        true,
    ),
    kind("PersistentVolume", "", "v1", "persistentvolumes", false),
    kind(
        "PersistentVolumeClaim",
        "",
        "v1",
        "persistentvolumeclaims",
        true,
    ),
    kind("ReplicaSet", "apps", "v1", "replicasets", true),
    kind("StatefulSet", "apps", "v1", "statefulsets", true),
    kind(
        "StorageClass",
        "storage.k8s.io",
        "v1",
        "storageclasses",
        false,
    ),
    kind("CSINode", "storage.k8s.io", "v1", "csinodes", false),
    kind("CSIDriver", "storage.k8s.io", "v1", "csidrivers", false),
    kind(
        "PodDisruptionBudget",
        "policy",
        "v1",
        "poddisruptionbudgets",
        true,
    ),
    kind(
        "PriorityClass",
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        false,
    ),
    kind(
        "DeviceClass",
        "resource.k8s.io",
        "v1",
        "deviceclasses",
        false,
    ),
    kind(
        "ResourceClaimTemplate",
        "resource.k8s.io",
        "v1",
        "resourceclaimtemplates",
        true,
    ),
    kind(
        "ResourceClaim",
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        true,
    ),
    kind(
        "ResourceSlice",
        "resource.k8s.io",
        "v1",
        "resourceslices",
        false,
    ),
];

impl DynamicKind {
    /// The kind named `kind`, when the driver knows it.
    pub fn of(kind: &str) -> Option<&'static DynamicKind> {
        KINDS.iter().find(|k| k.kind == kind)
    }

    fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.to_string(),
            version: self.version.to_string(),
            api_version: if self.group.is_empty() {
                self.version.to_string()
            } else {
                format!("{}/{}", self.group, self.version)
            },
            kind: self.kind.to_string(),
            plural: self.plural.to_string(),
        }
    }

    fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        let ar = self.api_resource();
        if self.namespaced {
            Api::namespaced_with(client.clone(), namespace, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        }
    }
}

/// Every namespace the workload's pods and objects live in, and the namespaces it creates.
pub fn namespaces_of(workload: &Workload) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for op in &workload.ops {
        match op {
            Op::CreatePods(c) => {
                out.insert(c.namespace.clone().unwrap_or_else(|| "default".into()));
            }
            Op::CreateObjects(docs) => {
                for doc in docs {
                    let name = doc.pointer("/metadata/name").and_then(|n| n.as_str());
                    let ns = doc.pointer("/metadata/namespace").and_then(|n| n.as_str());
                    match doc.get("kind").and_then(|k| k.as_str()) {
                        Some("Namespace") => out.extend(name.map(str::to_string)),
                        _ => out.extend(ns.map(str::to_string)),
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// One object of a [`DynamicKind`] the driver created.
#[derive(Debug, Clone)]
pub struct CreatedObject {
    kind: &'static DynamicKind,
    namespace: String,
    name: String,
}

/// Creates one `createObjects` document (namespaces were created before: they are
/// skipped). Returns what it created.
pub async fn create_object(
    client: &Client,
    doc: &serde_json::Value,
) -> Result<Option<CreatedObject>, String> {
    let kind_name = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    let Some(kind) = DynamicKind::of(kind_name) else {
        return Err(format!(
            "createObjects of kind {kind_name:?} is not supported"
        ));
    };
    if kind.kind == "Namespace" {
        return Ok(None);
    }
    let obj: DynamicObject = serde_json::from_value(doc.clone())
        .map_err(|e| format!("{kind_name}: not an object: {e}"))?;
    let name = obj.metadata.name.clone().unwrap_or_default();
    let namespace = obj
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    kind.api(client, &namespace)
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| format!("creating {kind_name} {name}: {e}"))?;
    Ok(Some(CreatedObject {
        kind,
        namespace,
        name,
    }))
}

/// Everything the driver created, to delete at the end.
#[derive(Debug, Default)]
pub struct Created {
    /// Pods, `namespace/name`.
    pub pods: Vec<String>,
    /// Nodes.
    pub nodes: Vec<String>,
    /// Namespaces that did not exist before.
    pub namespaces: Vec<String>,
    /// Other objects.
    pub objects: Vec<CreatedObject>,
}

impl Created {
    /// Deletes it all (pods at once, without a grace period), `concurrency` requests at a
    /// time; failures are logged, not returned: the result of the run stands.
    pub async fn delete_all(&mut self, client: &Client, concurrency: usize) {
        let pods = std::mem::take(&mut self.pods);
        crate::delete_pods(client, &pods, concurrency).await;
        let dp = DeleteParams::default();
        for o in std::mem::take(&mut self.objects) {
            if let Err(e) = o.kind.api(client, &o.namespace).delete(&o.name, &dp).await {
                tracing::warn!(kind = o.kind.kind, name = %o.name, error = %e, "deleting a benchmark object");
            }
        }
        let nodes: Api<Node> = Api::all(client.clone());
        futures::stream::iter(std::mem::take(&mut self.nodes))
            .map(|name| {
                let nodes = nodes.clone();
                let dp = dp.clone();
                async move {
                    if let Err(e) = nodes.delete(&name, &dp).await {
                        tracing::warn!(node = %name, error = %e, "deleting a benchmark node");
                    }
                }
            })
            .buffer_unordered(concurrency.max(1))
            .collect::<Vec<()>>()
            .await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for ns in std::mem::take(&mut self.namespaces) {
            if let Err(e) = namespaces.delete(&ns, &dp).await {
                tracing::warn!(namespace = %ns, error = %e, "deleting a benchmark namespace");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_come_from_pods_and_objects() {
        let w = Workload::from_str(
            "kind: Workload\nname: W\nops:\n- createObjects: [{apiVersion: v1, kind: Namespace, metadata: {name: sched-0}}, {apiVersion: v1, kind: Service, metadata: {name: s, namespace: svc}}]\n- createPods: {count: 1}\n- createPods: {count: 1, namespace: m, measure: true}\n",
            "w.yaml",
        )
        .expect("valid");
        let ns: Vec<String> = namespaces_of(&w).into_iter().collect();
        assert_eq!(ns, ["default", "m", "sched-0", "svc"]);
    }

    #[test]
    fn kinds_know_their_api_path() {
        let pdb = DynamicKind::of("PodDisruptionBudget").expect("known");
        let ar = pdb.api_resource();
        assert_eq!(ar.api_version, "policy/v1");
        assert_eq!(ar.plural, "poddisruptionbudgets");
        assert!(DynamicKind::of("Secret").is_none());
    }
}
