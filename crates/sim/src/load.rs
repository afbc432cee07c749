//! Loading ordinary Kubernetes manifests (multi-document YAML, JSON, `List` objects) into
//! the in-memory cluster. A broken object is reported with its file, object and field and
//! left out; everything else loads.

use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::de::DeserializeOwned;

use kubesched_framework::events::{EventObject, EventResource};
use kubesched_framework::registry;

use crate::cluster::SimCluster;

/// A problem with the input: which file, which object, which field, what.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InputProblem {
    /// The file.
    pub file: String,
    /// `Kind namespace/name`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The field path, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for InputProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(o) = &self.object {
            write!(f, ": {o}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Objects read from manifests, before they are applied to a cluster.
#[derive(Debug, Default, Clone)]
pub struct Manifests {
    /// Nodes.
    pub nodes: Vec<api::Node>,
    /// Pods (bound ones carry `spec.nodeName`).
    pub pods: Vec<api::Pod>,
    /// Priority classes, used to resolve `priorityClassName`.
    pub priority_classes: Vec<PriorityClass>,
    /// Every other supported object, as raw JSON with its kind.
    pub others: Vec<(String, serde_json::Value)>,
    /// Deployments: not simulated (pods are), kept for `--scale-workload`.
    pub deployments: Vec<k8s_openapi::api::apps::v1::Deployment>,
    /// A KubeSchedulerConfiguration found among the manifests, with its file.
    pub config: Option<(String, String)>,
}

/// Built-in kinds the simulator stores for plugins besides nodes, pods and priority
/// classes (whether or not a compiled-in plugin declares them, so a dump loads the same
/// in every build); the kinds compiled-in plugins declare load too (see
/// [`is_declared_kind`]).
pub const OTHER_KINDS: &[&str] = &[
    "Namespace",
    "Service",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
    "VolumeAttachment",
    "PodDisruptionBudget",
    "ResourceSlice",
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
];

/// Kinds that are valid Kubernetes objects but mean nothing to a scheduler simulation;
/// they are skipped silently.
const IGNORED_KINDS: &[&str] = &[
    "DaemonSet",
    "Job",
    "CronJob",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Endpoints",
    "EndpointSlice",
    "Event",
    "Lease",
    "ResourceQuota",
    "LimitRange",
    "Ingress",
    "NetworkPolicy",
    "HorizontalPodAutoscaler",
    "ControllerRevision",
    "CustomResourceDefinition",
];

fn files_under(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            if e.is_dir() {
                files_under(&e, out)?;
            } else if matches!(
                e.extension().and_then(|x| x.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                out.push(e);
            }
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

/// Reads every manifest under the paths (files, or folders walked in name order).
pub fn load_paths(paths: &[PathBuf]) -> (Manifests, Vec<InputProblem>) {
    let mut manifests = Manifests::default();
    let mut problems = Vec::new();
    let mut files = Vec::new();
    for p in paths {
        if let Err(e) = files_under(p, &mut files) {
            problems.push(InputProblem {
                file: p.display().to_string(),
                object: None,
                field: None,
                message: format!("cannot read: {e}"),
            });
        }
    }
    for f in files {
        let name = f.display().to_string();
        match std::fs::read_to_string(&f) {
            Ok(text) => load_text(&text, &name, &mut manifests, &mut problems),
            Err(e) => problems.push(InputProblem {
                file: name,
                object: None,
                field: None,
                message: format!("cannot read: {e}"),
            }),
        }
    }
    (manifests, problems)
}

/// Parses one file's text (YAML documents or JSON) into `manifests`.
pub fn load_text(
    text: &str,
    file: &str,
    manifests: &mut Manifests,
    problems: &mut Vec<InputProblem>,
) {
    let docs: Vec<serde_json::Value> = if text.trim_start().starts_with('{') {
        match serde_json::from_str(text) {
            Ok(v) => vec![v],
            Err(e) => {
                problems.push(InputProblem {
                    file: file.into(),
                    object: None,
                    field: None,
                    message: format!("invalid JSON: {e}"),
                });
                return;
            }
        }
    } else {
        match serde_saphyr::from_multiple::<serde_json::Value>(text) {
            Ok(v) => v,
            Err(e) => {
                problems.push(InputProblem {
                    file: file.into(),
                    object: None,
                    field: None,
                    message: format!("invalid YAML: {e}"),
                });
                return;
            }
        }
    };
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        add_object(
            doc,
            file,
            &format!("document {}", i + 1),
            text,
            manifests,
            problems,
        );
    }
}

fn describe(doc: &serde_json::Value, fallback: &str) -> String {
    let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("object");
    let meta = doc.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(|n| n.as_str());
    let ns = meta
        .and_then(|m| m.get("namespace"))
        .and_then(|n| n.as_str());
    match (ns, name) {
        (Some(ns), Some(n)) => format!("{kind} {ns}/{n}"),
        (None, Some(n)) => format!("{kind} {n}"),
        _ => format!("{kind} ({fallback})"),
    }
}

fn decode<T: DeserializeOwned + k8s_openapi::Resource>(
    doc: serde_json::Value,
    file: &str,
    object: &str,
    problems: &mut Vec<InputProblem>,
) -> Option<T> {
    // The typed decoders check a given apiVersion and kind themselves but report them
    // for the object as a whole; checked here first, the problem names the field.
    for (field, expected) in [("apiVersion", T::API_VERSION), ("kind", T::KIND)] {
        if let Some(given) = doc.get(field)
            && given.as_str() != Some(expected)
        {
            problems.push(InputProblem {
                file: file.into(),
                object: Some(object.into()),
                field: Some(field.into()),
                message: format!("expected {expected:?} for a {}, got {given}", T::KIND),
            });
            return None;
        }
    }
    match serde_path_to_error::deserialize::<_, T>(doc) {
        Ok(v) => Some(v),
        Err(e) => {
            let path = e.path().to_string();
            problems.push(InputProblem {
                file: file.into(),
                object: Some(object.into()),
                field: (path != ".").then_some(path),
                message: e.into_inner().to_string(),
            });
            None
        }
    }
}

fn add_object(
    doc: serde_json::Value,
    file: &str,
    position: &str,
    text: &str,
    manifests: &mut Manifests,
    problems: &mut Vec<InputProblem>,
) {
    let object = describe(&doc, position);
    let Some(kind) = doc.get("kind").and_then(|k| k.as_str()).map(str::to_string) else {
        problems.push(InputProblem {
            file: file.into(),
            object: Some(object),
            field: Some("kind".into()),
            message: "missing kind".into(),
        });
        return;
    };
    if doc
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(|n| n.as_str())
        .is_none_or(str::is_empty)
        && !kind.ends_with("List")
        && kind != "KubeSchedulerConfiguration"
    {
        problems.push(InputProblem {
            file: file.into(),
            object: Some(object),
            field: Some("metadata.name".into()),
            message: "an object needs a name".into(),
        });
        return;
    }
    match kind.as_str() {
        k if k.ends_with("List") => {
            let items = doc
                .get("items")
                .and_then(|i| i.as_array())
                .cloned()
                .unwrap_or_default();
            for (j, item) in items.into_iter().enumerate() {
                add_object(
                    item,
                    file,
                    &format!("{position}, item {}", j + 1),
                    text,
                    manifests,
                    problems,
                );
            }
        }
        "Node" => {
            if let Some(n) = decode::<api::Node>(doc, file, &object, problems) {
                manifests.nodes.push(n);
            }
        }
        "Pod" => {
            if let Some(p) = decode::<api::Pod>(doc, file, &object, problems) {
                manifests.pods.push(p);
            }
        }
        "PriorityClass" => {
            if let Some(p) = decode::<PriorityClass>(doc, file, &object, problems) {
                manifests.priority_classes.push(p);
            }
        }
        "Deployment" => {
            if let Some(d) = decode(doc, file, &object, problems) {
                manifests.deployments.push(d);
            }
        }
        "KubeSchedulerConfiguration" => {
            manifests.config = Some((file.to_string(), text.to_string()));
        }
        k if OTHER_KINDS.contains(&k) || is_declared_kind(&doc, k) => {
            manifests.others.push((kind, doc))
        }
        k if IGNORED_KINDS.contains(&k) => {}
        _ => problems.push(InputProblem {
            file: file.into(),
            object: Some(object),
            field: Some("kind".into()),
            message: format!("unknown kind {kind:?}; it is not simulated"),
        }),
    }
}

fn api_version_of(doc: &serde_json::Value) -> &str {
    doc.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("")
}

/// Whether a compiled-in plugin declares the object's kind (by `apiVersion` group and kind).
pub fn is_declared_kind(doc: &serde_json::Value, kind: &str) -> bool {
    let api_version = api_version_of(doc);
    registry::declared_kinds(registry::plugins())
        .reads
        .iter()
        .any(|k| k.matches(api_version, kind))
}

/// A change an applied object makes: the resource its events carry, the object it
/// replaced and the object as stored.
pub type AppliedObject = (EventResource, Option<EventObject>, EventObject);

/// Applies a stored object of another kind to the object store (every store of its kind:
/// the built-in ones and those of the kinds plugins declare), reporting decode errors with
/// the file, the object and the field. Returns the changes, for the change events'
/// queueing hints; empty when the kind has no store or the object could not be decoded.
pub fn apply_other(
    cluster: &SimCluster,
    kind: &str,
    doc: serde_json::Value,
    file: &str,
    problems: &mut Vec<InputProblem>,
) -> Vec<AppliedObject> {
    use k8s_openapi::api::resource::v1 as resource;
    let objects = cluster.objects();
    let api_version = api_version_of(&doc).to_string();
    for declared in registry::declared_kinds(registry::plugins()).reads {
        if declared.matches(&api_version, kind) {
            objects.register(declared);
        }
    }
    let stores: Vec<_> = if api_version.is_empty() {
        // Without an apiVersion only the kind can tell: a built-in kind of that name.
        objects
            .kinds()
            .into_iter()
            .filter(|k| k.kind == kind && OTHER_KINDS.contains(&kind))
            .map(|k| objects.register(k))
            .collect()
    } else {
        objects.stores_for(&api_version, kind)
    };
    let Some(first) = stores.first() else {
        return Vec::new();
    };
    let mut doc = doc;
    // A namespaced object written without a namespace lands in `default`, as `kubectl
    // apply` puts it there (pods are defaulted the same way).
    if first.kind().namespaced
        && let Some(meta) = doc.get_mut("metadata").and_then(|m| m.as_object_mut())
        && meta
            .get("namespace")
            .and_then(|n| n.as_str())
            .is_none_or(str::is_empty)
    {
        meta.insert("namespace".into(), "default".into());
    }
    let object = describe(&doc, "");
    match (first.kind().group, kind) {
        ("storage.k8s.io", "StorageClass") => {
            // The API server's defaults, which hand-written manifests leave out.
            if let Some(m) = doc.as_object_mut() {
                m.entry("volumeBindingMode").or_insert("Immediate".into());
                m.entry("reclaimPolicy").or_insert("Delete".into());
            }
        }
        ("resource.k8s.io", "ResourceClaim") => {
            // A claim needs the identity an API server gives it (uid, resourceVersion).
            let Some(mut claim) = decode::<resource::ResourceClaim>(doc, file, &object, problems)
            else {
                return Vec::new();
            };
            crate::claims::fill_identity(&mut claim);
            match serde_json::to_value(&claim) {
                Ok(v) => doc = v,
                Err(e) => {
                    problems.push(InputProblem {
                        file: file.into(),
                        object: Some(object),
                        field: None,
                        message: e.to_string(),
                    });
                    return Vec::new();
                }
            }
            doc["apiVersion"] = api_version.clone().into();
            doc["kind"] = kind.into();
        }
        _ => {}
    }
    let mut applied = Vec::new();
    for store in &stores {
        match store.upsert_raw(doc.clone()) {
            Ok((old, new)) => applied.push((store.kind().event_resource(), old, new)),
            Err(e) => problems.push(InputProblem {
                file: file.into(),
                object: Some(object.clone()),
                field: e.field,
                message: e.message,
            }),
        }
    }
    if kind == "ResourceClaimTemplate" && !applied.is_empty() {
        // Pods that waited for this template get their claims now.
        cluster.run_claim_controller();
    }
    applied
}

/// Priority of the built-in `system-cluster-critical` class.
pub const SYSTEM_CLUSTER_CRITICAL: i32 = 2_000_000_000;
/// Priority of the built-in `system-node-critical` class.
pub const SYSTEM_NODE_CRITICAL: i32 = 2_000_001_000;
/// A PriorityClass's `preemptionPolicy` when it sets none (the API server's default).
pub const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// The class a pod's priority comes from: its value, preemption policy and name.
struct ResolvedClass<'a> {
    name: Option<String>,
    value: i32,
    preemption_policy: &'a str,
}

impl<'a> ResolvedClass<'a> {
    fn of(class: &'a PriorityClass) -> Self {
        Self {
            name: class.metadata.name.clone(),
            value: class.value.unwrap_or(0),
            preemption_policy: class
                .preemption_policy
                .as_deref()
                .unwrap_or(PREEMPT_LOWER_PRIORITY),
        }
    }
}

/// The global default class: among classes with `globalDefault: true`, the lowest value
/// (as the admission plugin does when a race left several); equal values go to the
/// first name in alphabetical order, so the choice does not depend on input order.
fn global_default(classes: &[PriorityClass]) -> Option<&PriorityClass> {
    classes
        .iter()
        .filter(|c| c.global_default == Some(true))
        .min_by(|a, b| {
            a.value
                .cmp(&b.value)
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        })
}

/// Fills `spec.priority` and `spec.preemptionPolicy` as the API server's Priority
/// admission plugin does when a pod is created: from the class `priorityClassName`
/// names (the built-in `system-*-critical` classes included), or from the global
/// default class when it names none (also setting `priorityClassName` to it), or
/// priority 0 and `PreemptLowerPriority` when there is no default class.
///
/// A pod that already carries a field keeps it (it went through admission once, or its
/// author means it); only missing fields are filled. A class that does not exist is an
/// error only when the priority had to come from it.
pub fn resolve_priority(pod: &mut api::Pod, classes: &[PriorityClass]) -> Result<(), String> {
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(());
    };
    if spec.priority.is_some() && spec.preemption_policy.is_some() {
        return Ok(());
    }
    let named = spec.priority_class_name.clone().filter(|n| !n.is_empty());
    let resolved = match named.as_deref() {
        Some(name) => {
            let builtin = |value| ResolvedClass {
                name: Some(name.to_string()),
                value,
                preemption_policy: PREEMPT_LOWER_PRIORITY,
            };
            match classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
            {
                Some(c) => Some(ResolvedClass::of(c)),
                None if name == "system-cluster-critical" => Some(builtin(SYSTEM_CLUSTER_CRITICAL)),
                None if name == "system-node-critical" => Some(builtin(SYSTEM_NODE_CRITICAL)),
                None if spec.priority.is_none() => {
                    return Err(format!("no PriorityClass with name {name} was found"));
                }
                None => None,
            }
        }
        None => Some(global_default(classes).map_or(
            ResolvedClass {
                name: None,
                value: 0,
                preemption_policy: PREEMPT_LOWER_PRIORITY,
            },
            ResolvedClass::of,
        )),
    };
    let Some(class) = resolved else {
        return Ok(());
    };
    if spec.priority.is_none() {
        spec.priority = Some(class.value);
        if named.is_none() {
            spec.priority_class_name = class.name;
        }
    }
    if spec.preemption_policy.is_none() {
        spec.preemption_policy = Some(class.preemption_policy.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn namespaced_objects_without_a_namespace_land_in_default() {
        let cluster = SimCluster::new();
        let mut problems = Vec::new();
        let claim = serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}});
        let class = serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "p"});
        let attachment = serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"}, "spec": {"attacher": "d", "nodeName": "n", "source": {}}});
        assert!(
            !apply_other(&cluster, "PersistentVolumeClaim", claim, "f", &mut problems).is_empty()
        );
        assert!(!apply_other(&cluster, "StorageClass", class, "f", &mut problems).is_empty());
        assert!(
            !apply_other(&cluster, "VolumeAttachment", attachment, "f", &mut problems).is_empty()
        );
        assert!(problems.is_empty(), "{problems:?}");
        let o = cluster.objects();
        assert!(
            o.persistent_volume_claims
                .get(Some("default"), "data")
                .is_some()
        );
        assert!(o.storage_classes.get(None, "fast").is_some());
        assert!(o.volume_attachments.get(None, "va").is_some());
    }

    #[test]
    fn decode_problems_name_the_field() {
        let cases = [
            (
                r#"{"apiVersion": "", "kind": "Pod", "metadata": {"name": "p"}}"#,
                "apiVersion",
            ),
            (
                r#"{"apiVersion": "v2", "kind": "Node", "metadata": {"name": "n"}}"#,
                "apiVersion",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": 5}]}}"#,
                "spec.containers[0].name",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"priority": "high"}}"#,
                "spec.priority",
            ),
        ];
        for (text, field) in cases {
            let mut m = Manifests::default();
            let mut problems = Vec::new();
            load_text(text, "f.json", &mut m, &mut problems);
            assert_eq!(problems.len(), 1, "{text}: {problems:?}");
            assert_eq!(problems[0].field.as_deref(), Some(field), "{text}");
            assert!(problems[0].object.is_some(), "{text}");
        }
        // Hand-written manifests may leave apiVersion out.
        let mut m = Manifests::default();
        let mut problems = Vec::new();
        load_text(
            r#"{"kind": "Pod", "metadata": {"name": "p"}}"#,
            "f.json",
            &mut m,
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(m.pods.len(), 1);
    }

    fn class(name: &str, value: i32, global_default: bool, policy: Option<&str>) -> PriorityClass {
        PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            value: Some(value),
            global_default: global_default.then_some(true),
            preemption_policy: policy.map(str::to_string),
            ..Default::default()
        }
    }

    fn pod(class: Option<&str>, priority: Option<i32>, policy: Option<&str>) -> api::Pod {
        api::Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(api::PodSpec {
                priority_class_name: class.map(str::to_string),
                priority,
                preemption_policy: policy.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// (priorityClassName, priority, preemptionPolicy) after resolution, or the error.
    type Resolved = Result<(Option<String>, Option<i32>, Option<String>), String>;

    fn check(classes: &[PriorityClass], mut input: api::Pod, expect: Resolved) {
        let got = resolve_priority(&mut input, classes).map(|()| {
            let spec = input.spec.unwrap_or_default();
            (
                spec.priority_class_name,
                spec.priority,
                spec.preemption_policy,
            )
        });
        assert_eq!(got, expect);
    }

    fn ok(class: Option<&str>, priority: i32, policy: &str) -> Resolved {
        Ok((
            class.map(str::to_string),
            Some(priority),
            Some(policy.to_string()),
        ))
    }

    fn classes() -> Vec<PriorityClass> {
        vec![
            class("high", 1000, false, None),
            class("batch-never", 500, false, Some("Never")),
            class("default-never", 10, true, Some("Never")),
        ]
    }

    #[test]
    fn named_class_gives_value_and_policy() {
        check(
            &classes(),
            pod(Some("high"), None, None),
            ok(Some("high"), 1000, PREEMPT_LOWER_PRIORITY),
        );
        check(
            &classes(),
            pod(Some("batch-never"), None, None),
            ok(Some("batch-never"), 500, "Never"),
        );
    }

    #[test]
    fn global_default_gives_value_policy_and_name() {
        // The upstream difference issue 21 fixed: the default class's Never is copied too.
        check(
            &classes(),
            pod(None, None, None),
            ok(Some("default-never"), 10, "Never"),
        );
        check(
            &classes(),
            pod(Some(""), None, None),
            ok(Some("default-never"), 10, "Never"),
        );
    }

    #[test]
    fn several_global_defaults_pick_the_lowest_value_then_name() {
        let several = vec![
            class("zeta", 5, true, None),
            class("beta", 7, true, Some("Never")),
            class("alpha", 5, true, Some("Never")),
        ];
        check(
            &several,
            pod(None, None, None),
            ok(Some("alpha"), 5, "Never"),
        );
    }

    #[test]
    fn without_a_default_class_priority_is_zero_and_may_preempt() {
        let none = vec![class("high", 1000, false, None)];
        check(
            &none,
            pod(None, None, None),
            ok(None, 0, PREEMPT_LOWER_PRIORITY),
        );
    }

    #[test]
    fn builtin_system_classes() {
        check(
            &[],
            pod(Some("system-node-critical"), None, None),
            ok(
                Some("system-node-critical"),
                SYSTEM_NODE_CRITICAL,
                PREEMPT_LOWER_PRIORITY,
            ),
        );
        check(
            &[],
            pod(Some("system-cluster-critical"), None, None),
            ok(
                Some("system-cluster-critical"),
                SYSTEM_CLUSTER_CRITICAL,
                PREEMPT_LOWER_PRIORITY,
            ),
        );
    }

    #[test]
    fn explicit_values_are_kept() {
        // Both carried (a dump of a real cluster): untouched, even with a default class.
        check(
            &classes(),
            pod(None, Some(42), Some(PREEMPT_LOWER_PRIORITY)),
            Ok((None, Some(42), Some(PREEMPT_LOWER_PRIORITY.into()))),
        );
        check(
            &classes(),
            pod(Some("high"), Some(7), Some("Never")),
            ok(Some("high"), 7, "Never"),
        );
        // Only the missing one is filled from the class.
        check(
            &classes(),
            pod(Some("batch-never"), Some(3), None),
            ok(Some("batch-never"), 3, "Never"),
        );
        check(
            &classes(),
            pod(Some("high"), None, Some("Never")),
            ok(Some("high"), 1000, "Never"),
        );
        check(
            &classes(),
            pod(None, None, Some(PREEMPT_LOWER_PRIORITY)),
            ok(Some("default-never"), 10, PREEMPT_LOWER_PRIORITY),
        );
    }

    #[test]
    fn missing_class_is_an_error_only_when_the_priority_must_come_from_it() {
        check(
            &classes(),
            pod(Some("gone"), None, None),
            Err("no PriorityClass with name gone was found".into()),
        );
        // An admitted pod whose class was deleted since keeps what it has.
        check(
            &classes(),
            pod(Some("gone"), Some(9), None),
            Ok((Some("gone".into()), Some(9), None)),
        );
    }

    #[test]
    fn a_pod_without_spec_is_left_alone() {
        let mut p = api::Pod::default();
        assert_eq!(resolve_priority(&mut p, &classes()), Ok(()));
        assert!(p.spec.is_none());
    }
}
