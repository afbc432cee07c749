//! Workload files: ordered operations that build large synthetic clusters without big
//! manifest files, in the spirit of upstream's scheduler_perf.
//!
//! ```yaml
//! kind: Workload
//! name: SchedulingBasic/500Nodes
//! ops:
//! - createNodes: {count: 500, template: {metadata: {name: node}, status: {allocatable: {cpu: "4", memory: 32Gi, pods: "110"}}}}
//! - createPods: {count: 1000, namespace: init, template: {...}}
//! - createPods: {count: 10000, namespace: measured, template: {...}, measure: true}
//! - barrier: {}
//! - expect: {scheduled: 11000}
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use serde::Deserialize;

/// A workload file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    /// `Workload`.
    pub kind: String,
    /// Free-form version string.
    #[serde(default)]
    pub api_version: Option<String>,
    /// The workload's name (benchmarks use `Name/500Nodes`).
    pub name: String,
    /// What it exercises.
    #[serde(default)]
    pub description: Option<String>,
    /// Feature gates the workload needs (e.g. `GenericWorkload: true` for gangs), set on
    /// top of the release's defaults when the workload runs on its own (bench, simulate).
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    /// The operations, run in order.
    pub ops: Vec<Op>,
}

/// One operation.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Op {
    /// Creates `count` nodes from a template.
    CreateNodes(CreateNodes),
    /// Creates `count` pods from a template.
    CreatePods(CreatePods),
    /// Creates arbitrary objects (namespaces, services, priority classes...).
    CreateObjects(Vec<serde_json::Value>),
    /// Deletes pods.
    DeletePods(DeletePods),
    /// Moves the virtual clock (backoff and unschedulable flushes run on it).
    AdvanceClock(AdvanceClock),
    /// Runs the scheduler until nothing is left to try.
    Barrier(Barrier),
    /// Checks counts so far; a mismatch fails the run.
    Expect(Expect),
}

/// `createNodes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateNodes {
    /// How many.
    pub count: usize,
    /// A Node manifest; its name is the prefix (`node` by default), `-<i>` is appended.
    #[serde(default)]
    pub template: Option<serde_json::Value>,
    /// Zones assigned round-robin as `topology.kubernetes.io/zone`.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Extra labels whose values cycle through the given list, by node index.
    #[serde(default)]
    pub cycle_labels: BTreeMap<String, Vec<String>>,
    /// A CSINode for every node (as scheduler_perf's `nodeAllocatableStrategy`).
    #[serde(default)]
    pub csi_node: Option<CsiNodeTemplate>,
    /// A ResourceSlice published for each node, as a DRA driver would: named
    /// `<node>-<driver>`, with `spec.nodeName` and the pool name set to the node's name.
    #[serde(default)]
    pub resource_slice: Option<serde_json::Value>,
}

/// The CSINode each created node gets.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CsiNodeTemplate {
    /// Attach limit per CSI driver (`spec.drivers[].allocatable.count`).
    #[serde(default)]
    pub allocatable: BTreeMap<String, i32>,
    /// In-tree plugins migrated on the node (the `storage.alpha.kubernetes.io/migrated-plugins`
    /// annotation).
    #[serde(default)]
    pub migrated_plugins: Vec<String>,
}

/// `createPods`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreatePods {
    /// How many.
    pub count: usize,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// A Pod manifest; its name is the prefix (`pod` by default), `-<i>` is appended.
    #[serde(default)]
    pub template: Option<serde_json::Value>,
    /// Whether these pods count in the measured phase (benchmarks).
    #[serde(default)]
    pub measure: bool,
    /// Schedule after every this many pods (0: only at the next barrier or the end).
    #[serde(default)]
    pub schedule_every: usize,
    /// A PersistentVolume manifest: each pod gets its own volume `vol-<n>` made from it (its
    /// AWS EBS volume ID, GCE PD name or CSI volume handle set to the volume's name), bound to
    /// a claim made from `persistentVolumeClaimTemplate`, which the pod mounts (as
    /// scheduler_perf's templates of the same names).
    #[serde(default)]
    pub persistent_volume_template: Option<serde_json::Value>,
    /// The PersistentVolumeClaim manifest that goes with `persistentVolumeTemplate`; each
    /// claim is named after its pod.
    #[serde(default)]
    pub persistent_volume_claim_template: Option<serde_json::Value>,
    /// Puts the pods in pod groups of `size` (upstream's workload-aware scheduling): the
    /// op first creates the `scheduling.k8s.io/v1beta1` PodGroups `<prefix>-<g>`, then pod
    /// `n` names `<prefix>-<n / size>` in `spec.schedulingGroup.podGroupName`.
    #[serde(default)]
    pub pod_groups: Option<PodGroupSplit>,
    /// Pods rendered one by one from a template whose text depends on the pod's index
    /// (upstream scheduler_perf's Go templates); set by the scheduler_perf reader, not by
    /// workload files. A rendered pod keeps the name it was given.
    #[serde(skip)]
    pub indexed_template: Option<IndexedTemplate>,
}

/// `createPods.podGroups`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodGroupSplit {
    /// Pods per group.
    pub size: usize,
    /// The groups' name prefix (`gang` by default).
    #[serde(default)]
    pub prefix: Option<String>,
    /// `gang` (all or nothing, `minCount` = `size` unless `minCount` says otherwise) or
    /// `basic` (each pod on its own).
    #[serde(default)]
    pub policy: PodGroupPolicy,
    /// The gang's `minCount` (default: `size`).
    #[serde(default)]
    pub min_count: Option<u32>,
    /// A node label whose domains each group must fit in
    /// (`spec.schedulingConstraints.topology[0].key`, TopologyAwareWorkloadScheduling).
    #[serde(default)]
    pub topology_key: Option<String>,
}

/// A generated PodGroup's scheduling policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PodGroupPolicy {
    /// `gang: {minCount}`.
    #[default]
    Gang,
    /// `basic: {}`.
    Basic,
}

impl PodGroupSplit {
    /// The groups `count` pods fill (the last one may be smaller).
    pub fn groups(&self, count: usize) -> usize {
        count.div_ceil(self.size.max(1))
    }

    /// The name of group `g`.
    pub fn name(&self, g: usize) -> String {
        format!("{}-{g}", self.prefix.as_deref().unwrap_or("gang"))
    }

    /// The PodGroup object of group `g` in `namespace`.
    pub fn object(&self, g: usize, namespace: &str) -> serde_json::Value {
        let policy = match self.policy {
            PodGroupPolicy::Gang => serde_json::json!({"gang": {
                "minCount": self.min_count.unwrap_or(self.size as u32)
            }}),
            PodGroupPolicy::Basic => serde_json::json!({"basic": {}}),
        };
        let mut spec = serde_json::json!({"schedulingPolicy": policy});
        if let Some(key) = &self.topology_key {
            spec["schedulingConstraints"] = serde_json::json!({"topology": [{"key": key}]});
        }
        serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": self.name(g), "namespace": namespace},
            "spec": spec,
        })
    }
}

/// A pod template rendered for each pod's index (see [`CreatePods::indexed_template`]).
#[derive(Debug, Clone)]
pub struct IndexedTemplate {
    /// Where the template came from (for errors).
    pub source: String,
    /// The parsed template.
    pub template: std::sync::Arc<crate::go_template::GoTemplate>,
    /// The values it reads besides `Index` and `Count`.
    pub params: serde_json::Map<String, serde_json::Value>,
}

impl IndexedTemplate {
    /// The pod of index `index` out of `count`.
    pub fn pod(&self, index: usize, count: usize) -> Result<api::Pod, String> {
        let mut env = self.params.clone();
        env.insert("Index".into(), index.into());
        env.insert("Count".into(), count.into());
        let text = self
            .template
            .render(&env)
            .map_err(|e| format!("template {}: {e}", self.source))?;
        let value: serde_json::Value = serde_saphyr::from_str(&text)
            .map_err(|e| format!("template {} (index {index}): {e}", self.source))?;
        pod_template(Some(&value))
            .map_err(|m| format!("template {} (index {index}){m}: invalid Pod", self.source))
    }
}

/// `deletePods`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeletePods {
    /// Namespace of the pods to delete.
    pub namespace: String,
    /// Only pods with all these labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// At most this many (all when absent), oldest names first.
    #[serde(default)]
    pub count: Option<usize>,
}

/// `advanceClock`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdvanceClock {
    /// Seconds.
    pub seconds: u64,
}

/// `barrier` (no fields).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Barrier {}

/// `expect`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Scheduled pods so far.
    #[serde(default)]
    pub scheduled: Option<usize>,
    /// Unschedulable pods so far.
    #[serde(default)]
    pub unschedulable: Option<usize>,
}

/// A workload file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid workload.
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// Where.
        field: String,
        /// What.
        message: String,
    },
}

impl Workload {
    /// Reads and checks a workload file (a regular file of at most
    /// [`MAX_FILE_BYTES`](crate::MAX_FILE_BYTES): a device or a pipe is refused unread).
    pub fn from_file(path: &std::path::Path) -> Result<Self, WorkloadError> {
        let file = path.display().to_string();
        let text = kubesched_config::input::read_text_file(path, crate::MAX_FILE_BYTES).map_err(
            |source| WorkloadError::Io {
                file: file.clone(),
                source,
            },
        )?;
        Self::from_str(&text, &file)
    }

    /// Parses and checks workload text.
    pub fn from_str(text: &str, file: &str) -> Result<Self, WorkloadError> {
        let invalid = |field: String, message: String| WorkloadError::Invalid {
            file: file.to_string(),
            field,
            message,
        };
        let value: serde_json::Value = serde_saphyr::from_str(text)
            .map_err(|e| invalid("(document)".into(), format!("invalid YAML: {e}")))?;
        let w: Workload = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            invalid(path, e.into_inner().to_string())
        })?;
        if w.kind != "Workload" {
            return Err(invalid(
                "kind".into(),
                format!("expected Workload, got {:?}", w.kind),
            ));
        }
        for (i, op) in w.ops.iter().enumerate() {
            match op {
                Op::CreateNodes(c) => {
                    node_template(c.template.as_ref()).map_err(|m| {
                        invalid(
                            format!("ops[{i}].createNodes.template{m}"),
                            "invalid Node".into(),
                        )
                    })?;
                }
                Op::CreatePods(c) => {
                    pod_template(c.template.as_ref()).map_err(|m| {
                        invalid(
                            format!("ops[{i}].createPods.template{m}"),
                            "invalid Pod".into(),
                        )
                    })?;
                    volume_templates(c)
                        .map_err(|(field, m)| invalid(format!("ops[{i}].createPods.{field}"), m))?;
                    if c.pod_groups.as_ref().is_some_and(|g| g.size == 0) {
                        return Err(invalid(
                            format!("ops[{i}].createPods.podGroups.size"),
                            "must be at least 1".into(),
                        ));
                    }
                    if c.pod_groups.as_ref().and_then(|g| g.min_count) == Some(0) {
                        return Err(invalid(
                            format!("ops[{i}].createPods.podGroups.minCount"),
                            "must be at least 1".into(),
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(w)
    }
}

fn decode_template<T: serde::de::DeserializeOwned + Default>(
    v: Option<&serde_json::Value>,
) -> Result<T, String> {
    match v {
        None => Ok(T::default()),
        Some(v) => serde_path_to_error::deserialize(v.clone()).map_err(|e| {
            let path = e.path().to_string();
            format!(".{path}: {}", e.into_inner())
        }),
    }
}

/// The typed node template.
pub fn node_template(v: Option<&serde_json::Value>) -> Result<api::Node, String> {
    decode_template(v)
}

/// The typed volume and claim templates of a `createPods` op (None when it has none); an
/// error names the field.
pub fn volume_templates(
    c: &CreatePods,
) -> Result<Option<(api::PersistentVolume, api::PersistentVolumeClaim)>, (String, String)> {
    match (
        &c.persistent_volume_template,
        &c.persistent_volume_claim_template,
    ) {
        (None, None) => Ok(None),
        (Some(pv), Some(pvc)) => {
            let pv = decode_template(Some(pv)).map_err(|m| {
                (
                    format!("persistentVolumeTemplate{m}"),
                    "invalid PersistentVolume".to_string(),
                )
            })?;
            let pvc = decode_template(Some(pvc)).map_err(|m| {
                (
                    format!("persistentVolumeClaimTemplate{m}"),
                    "invalid PersistentVolumeClaim".to_string(),
                )
            })?;
            Ok(Some((pv, pvc)))
        }
        (Some(_), None) => Err((
            "persistentVolumeClaimTemplate".into(),
            "required with persistentVolumeTemplate".into(),
        )),
        (None, Some(_)) => Err((
            "persistentVolumeTemplate".into(),
            "required with persistentVolumeClaimTemplate".into(),
        )),
    }
}

/// Node number `n` of a `createNodes` op, from its typed template: named `<prefix>-<n>`
/// (the template's name is the prefix, `node` by default), with its hostname label, its
/// zone (round-robin over `zones`) and its cycled labels. The simulator and `kubesched
/// bench --kubeconfig` both build their nodes with it.
pub fn generated_node(template: &api::Node, c: &CreateNodes, n: usize) -> api::Node {
    let mut node = template.clone();
    let prefix = template.metadata.name.as_deref().unwrap_or("node");
    let name = format!("{prefix}-{n}");
    node.metadata.name = Some(name.clone());
    let labels = node.metadata.labels.get_or_insert_with(Default::default);
    labels.insert("kubernetes.io/hostname".into(), name);
    if !c.zones.is_empty() {
        labels.insert(
            "topology.kubernetes.io/zone".into(),
            c.zones[n % c.zones.len()].clone(),
        );
    }
    for (k, values) in &c.cycle_labels {
        if !values.is_empty() {
            labels.insert(k.clone(), values[n % values.len()].clone());
        }
    }
    node
}

/// The typed pod template.
pub fn pod_template(v: Option<&serde_json::Value>) -> Result<api::Pod, String> {
    decode_template(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "kind: Workload\nname: w\nops:\n- createPods:\n    count: 1\n";

    #[test]
    fn volume_templates_go_together() {
        let only_pv = format!(
            "{HEAD}    persistentVolumeTemplate: {{spec: {{csi: {{driver: d, volumeHandle: h}}}}}}\n"
        );
        let e = Workload::from_str(&only_pv, "w.yaml").expect_err("refused");
        assert_eq!(
            e.to_string(),
            "w.yaml: ops[0].createPods.persistentVolumeClaimTemplate: required with persistentVolumeTemplate"
        );
        let bad_claim = format!(
            "{HEAD}    persistentVolumeTemplate: {{}}\n    persistentVolumeClaimTemplate: {{spec: {{accessModes: 3}}}}\n"
        );
        let e = Workload::from_str(&bad_claim, "w.yaml").expect_err("refused");
        assert!(
            e.to_string().starts_with(
                "w.yaml: ops[0].createPods.persistentVolumeClaimTemplate.spec.accessModes"
            ),
            "{e}"
        );
        let both = format!(
            "{HEAD}    persistentVolumeTemplate: {{}}\n    persistentVolumeClaimTemplate: {{}}\n"
        );
        let w = Workload::from_str(&both, "w.yaml").expect("valid");
        let Op::CreatePods(c) = &w.ops[0] else {
            panic!("createPods")
        };
        assert!(volume_templates(c).expect("valid").is_some());
    }
}
