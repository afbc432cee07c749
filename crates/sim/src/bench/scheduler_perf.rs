//! Upstream scheduler_perf's own benchmark definitions (`performance-config.yaml` files of
//! test/integration/scheduler_perf), read unchanged and turned into kubesched workloads, so
//! a test case defined upstream runs here and its result sits beside upstream's threshold.
//!
//! A file is a list of test cases: `name`, `defaultPodTemplatePath`, `featureGates`,
//! `workloadTemplate` (the ops, with `countParam: $name` taken from each workload's
//! `params`) and `workloads` (`name`, `labels`, `params`, `threshold`, `featureGates`; the
//! test case's and workload's gates are the translated workload's `featureGates`). Template
//! paths are relative to the file, as upstream reads them, and every template is expanded
//! as a Go template (the subset in [`crate::go_template`]: `.Index`, `.Count`, the op's
//! `templateParams`, scheduler_perf's arithmetic functions). The ops kubesched runs:
//! `createNodes` (count, `nodeTemplatePath`, `labelNodePrepareStrategy`),
//! `createNamespaces` (`prefix`, count), `createPods` (count, `countMultiplierParam`,
//! `namespace` or upstream's `namespace-<op index>`, `podTemplatePath` rendered per pod
//! when it reads `.Index`, `collectMetrics` → measured, `persistentVolumeTemplatePath`,
//! `persistentVolumeClaimTemplatePath`), `createAny` and `createPodGroups` (count objects
//! from `templatePath`, each with its `.Index`), `waitForPodGroups` (nothing to wait for in
//! memory), `deletePods` (`namespace`, `labelSelector`), `barrier` and `sleep`. A test case
//! using anything else (`steadyState`, signature batches, `churn`, explicit metric windows,
//! the allocatable and unique-label node strategies, template actions beyond the subset…)
//! is not run and its reason is given, so an upstream file always loads and shows what it
//! could not run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::go_template::GoTemplate;
use crate::workload::{
    AdvanceClock, Barrier, CreateNodes, CreatePods, DeletePods, IndexedTemplate, Op, Workload,
    WorkloadError,
};

/// One upstream workload, translated (or why not).
#[derive(Debug, Clone)]
pub struct PerfCase {
    /// `TestCase/Workload`, as upstream's benchmark names it.
    pub name: String,
    /// The workload's labels (`performance`, `fast`, …).
    pub labels: Vec<String>,
    /// Upstream's threshold: the least scheduling throughput (pods/s) its CI accepts.
    pub threshold: Option<f64>,
    /// The feature gates the test case and workload set.
    pub feature_gates: BTreeMap<String, bool>,
    /// The workload, or why it cannot run here.
    pub workload: Result<Workload, String>,
}

/// Reads an upstream scheduler_perf configuration file.
pub fn read(path: &Path) -> Result<Vec<PerfCase>, WorkloadError> {
    let file = path.display().to_string();
    let text =
        kubesched_config::input::read_text_file(path, crate::MAX_FILE_BYTES).map_err(|source| {
            WorkloadError::Io {
                file: file.clone(),
                source,
            }
        })?;
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    parse(&text, &file, &dir)
}

/// Parses a configuration's text; templates are read relative to `dir`.
pub fn parse(text: &str, file: &str, dir: &Path) -> Result<Vec<PerfCase>, WorkloadError> {
    let invalid = |field: &str, message: String| WorkloadError::Invalid {
        file: file.to_string(),
        field: field.to_string(),
        message,
    };
    let value: Value = serde_saphyr::from_str(text)
        .map_err(|e| invalid("(document)", format!("invalid YAML: {e}")))?;
    let cases = value
        .as_array()
        .ok_or_else(|| invalid("(document)", "expected a list of test cases".into()))?;
    let mut out = Vec::new();
    for (ci, case) in cases.iter().enumerate() {
        let case_name = case["name"]
            .as_str()
            .ok_or_else(|| invalid(&format!("[{ci}].name"), "missing".into()))?;
        let template = case["workloadTemplate"].as_array().ok_or_else(|| {
            invalid(
                &format!("[{ci}].workloadTemplate"),
                "missing or not a list".into(),
            )
        })?;
        let workloads = case["workloads"]
            .as_array()
            .ok_or_else(|| invalid(&format!("[{ci}].workloads"), "missing or not a list".into()))?;
        let case_gates = gates(&case["featureGates"]);
        for (wi, w) in workloads.iter().enumerate() {
            let w_name = w["name"].as_str().ok_or_else(|| {
                invalid(&format!("[{ci}].workloads[{wi}].name"), "missing".into())
            })?;
            let name = format!("{case_name}/{w_name}");
            let mut feature_gates = case_gates.clone();
            feature_gates.extend(gates(&w["featureGates"]));
            let translated = Translation {
                dir,
                params: &w["params"],
                default_pod_template: case["defaultPodTemplatePath"].as_str(),
            }
            .workload(&name, template)
            .map(|mut workload| {
                workload.feature_gates = feature_gates.clone();
                workload
            });
            out.push(PerfCase {
                name,
                labels: w["labels"]
                    .as_array()
                    .map(|l| {
                        l.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                threshold: w["threshold"].as_f64(),
                feature_gates,
                workload: translated,
            });
        }
    }
    Ok(out)
}

fn gates(value: &Value) -> BTreeMap<String, bool> {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_bool().map(|b| (k.clone(), b)))
                .collect()
        })
        .unwrap_or_default()
}

/// Upstream's node when no template is given (scheduler_perf's base node).
fn default_node() -> Value {
    json!({
        "metadata": {"name": "scheduler-perf"},
        "status": {
            "capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
            "allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    })
}

/// Upstream's pod when neither the op nor the test case names a template.
fn default_pod() -> Value {
    json!({
        "metadata": {"name": "pod"},
        "spec": {"containers": [{
            "name": "pause",
            "image": "registry.k8s.io/pause:3.10.1",
            "ports": [{"containerPort": 80}],
            "resources": {
                "limits": {"cpu": "100m", "memory": "500Mi"},
                "requests": {"cpu": "100m", "memory": "500Mi"},
            },
        }]},
    })
}

struct Translation<'a> {
    dir: &'a Path,
    params: &'a Value,
    default_pod_template: Option<&'a str>,
}

impl Translation<'_> {
    fn workload(&self, name: &str, ops: &[Value]) -> Result<Workload, String> {
        let mut out = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            out.extend(
                self.op(i, op)
                    .map_err(|e| format!("workloadTemplate[{i}]: {e}"))?,
            );
        }
        Ok(Workload {
            kind: "Workload".into(),
            api_version: None,
            name: name.to_string(),
            description: Some("upstream scheduler_perf test case".into()),
            feature_gates: BTreeMap::new(),
            ops: out,
        })
    }

    fn param(&self, reference: &str) -> Result<&Value, String> {
        let key = reference.strip_prefix('$').unwrap_or(reference);
        let value = &self.params[key];
        if value.is_null() {
            return Err(format!("parameter {reference} is not defined"));
        }
        Ok(value)
    }

    fn count(&self, op: &Value) -> Result<usize, String> {
        let base = if let Some(param) = op["countParam"].as_str() {
            self.param(param)?
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| format!("parameter {param} is not a count"))?
        } else {
            op["count"]
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| "no count or countParam".to_string())?
        };
        // Upstream's countMultiplierParam: pods per group times groups.
        match op["countMultiplierParam"].as_str() {
            Some(param) => {
                let factor = self
                    .param(param)?
                    .as_u64()
                    .ok_or_else(|| format!("parameter {param} is not a count"))?;
                Ok(base * factor as usize)
            }
            None => Ok(base),
        }
    }

    /// The op's `templateParams`, `$name` values taken from the workload's params.
    fn template_params(&self, op: &Value) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        if let Some(params) = op["templateParams"].as_object() {
            for (k, v) in params {
                let value = match v.as_str() {
                    Some(r) if r.starts_with('$') => self.param(r)?.clone(),
                    _ => v.clone(),
                };
                out.insert(k.clone(), value);
            }
        }
        Ok(out)
    }

    /// A template file parsed as a Go template (upstream expands every object template).
    fn go_template(&self, path: &str) -> Result<(String, GoTemplate), String> {
        let full: PathBuf = self.dir.join(path);
        let text = std::fs::read_to_string(&full)
            .map_err(|e| format!("template {}: {e}", full.display()))?;
        let parsed =
            GoTemplate::parse(&text).map_err(|e| format!("template {}: {e}", full.display()))?;
        Ok((full.display().to_string(), parsed))
    }

    /// A template rendered once with `env` (its text must not depend on an object's index).
    fn rendered(&self, path: &str, env: &Map<String, Value>) -> Result<Value, String> {
        let (source, parsed) = self.go_template(path)?;
        let text = parsed
            .render(env)
            .map_err(|e| format!("template {source}: {e}"))?;
        serde_saphyr::from_str(&text).map_err(|e| format!("template {source}: {e}"))
    }

    fn template(&self, path: &str) -> Result<Value, String> {
        self.rendered(path, &Map::new())
    }

    /// `count` objects from one template, each rendered with its `Index` (and `Count`), in
    /// `namespace` when given: createAny and createPodGroups.
    fn objects(
        &self,
        path: &str,
        count: usize,
        namespace: Option<&str>,
        params: &Map<String, Value>,
    ) -> Result<Vec<Value>, String> {
        let (source, parsed) = self.go_template(path)?;
        (0..count)
            .map(|index| {
                let mut env = params.clone();
                env.insert("Index".into(), index.into());
                env.insert("Count".into(), count.into());
                let text = parsed
                    .render(&env)
                    .map_err(|e| format!("template {source}: {e}"))?;
                let mut object: Value = serde_saphyr::from_str(&text)
                    .map_err(|e| format!("template {source} (index {index}): {e}"))?;
                if let Some(ns) = namespace {
                    object["metadata"]["namespace"] = ns.into();
                }
                Ok(object)
            })
            .collect()
    }

    fn optional_template(&self, op: &Value, field: &str) -> Result<Option<Value>, String> {
        op[field].as_str().map(|p| self.template(p)).transpose()
    }

    fn op(&self, index: usize, op: &Value) -> Result<Vec<Op>, String> {
        let opcode = op["opcode"].as_str().ok_or("no opcode")?;
        let refuse = |what: &str| Err(format!("{opcode}: {what} is not supported by kubesched"));
        match opcode {
            "createNodes" => {
                for strategy in ["nodeAllocatableStrategy", "uniqueNodeLabelStrategy"] {
                    if !op[strategy].is_null() {
                        return refuse(strategy);
                    }
                }
                let mut cycle_labels = BTreeMap::new();
                let label = &op["labelNodePrepareStrategy"];
                if !label.is_null() {
                    let key = label["labelKey"]
                        .as_str()
                        .ok_or("labelNodePrepareStrategy: no labelKey")?;
                    let values: Vec<String> = label["labelValues"]
                        .as_array()
                        .map(|v| {
                            v.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default();
                    if values.is_empty() {
                        return refuse("labelNodePrepareStrategy without labelValues");
                    }
                    cycle_labels.insert(key.to_string(), values);
                }
                let params = self.template_params(op)?;
                let count = self.count(op)?;
                // A node template that reads `.Index` (its name, zone or rack by position)
                // gives each node its own object, named as the template names it.
                if let Some(path) = op["nodeTemplatePath"].as_str()
                    && self.go_template(path)?.1.reads("Index")
                {
                    if !cycle_labels.is_empty() {
                        return refuse("labelNodePrepareStrategy with a per-node template");
                    }
                    let mut nodes = self.objects(path, count, None, &params)?;
                    for node in &mut nodes {
                        node["apiVersion"] = "v1".into();
                        node["kind"] = "Node".into();
                    }
                    return Ok(vec![Op::CreateObjects(nodes)]);
                }
                Ok(vec![Op::CreateNodes(CreateNodes {
                    count,
                    template: Some(match op["nodeTemplatePath"].as_str() {
                        Some(p) => self.rendered(p, &params)?,
                        None => default_node(),
                    }),
                    zones: Vec::new(),
                    cycle_labels,
                    csi_node: None,
                    resource_slice: None,
                })])
            }
            "createNamespaces" => {
                let prefix = op["prefix"].as_str().ok_or("createNamespaces: no prefix")?;
                let count = self.count(op)?;
                Ok(vec![Op::CreateObjects(
                    (0..count)
                        .map(|i| {
                            json!({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": format!("{prefix}-{i}")}})
                        })
                        .collect(),
                )])
            }
            "createPods" => {
                if op["steadyState"].as_bool() == Some(true) || !op["steadyStateParam"].is_null() {
                    return refuse("steadyState");
                }
                if !op["signatureBatchSize"].is_null() || !op["signatureBatchSizeParam"].is_null() {
                    return refuse("signatureBatchSize");
                }
                let params = self.template_params(op)?;
                let count = self.count(op)?;
                let (template, indexed_template) =
                    match op["podTemplatePath"].as_str().or(self.default_pod_template) {
                        Some(p) => {
                            let (source, parsed) = self.go_template(p)?;
                            if parsed.reads("Index") || parsed.reads("Count") {
                                let indexed = IndexedTemplate {
                                    source,
                                    template: Arc::new(parsed),
                                    params,
                                };
                                // The first pod stands for the template (checked now).
                                let first = indexed.pod(0, count.max(1))?;
                                let first = serde_json::to_value(first)
                                    .map_err(|e| format!("template {p}: {e}"))?;
                                (first, Some(indexed))
                            } else {
                                (self.rendered(p, &params)?, None)
                            }
                        }
                        None => (default_pod(), None),
                    };
                Ok(vec![Op::CreatePods(CreatePods {
                    count,
                    namespace: Some(
                        op["namespace"]
                            .as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| format!("namespace-{index}")),
                    ),
                    template: Some(template),
                    measure: op["collectMetrics"].as_bool().unwrap_or(false),
                    schedule_every: 0,
                    persistent_volume_template: self
                        .optional_template(op, "persistentVolumeTemplatePath")?,
                    persistent_volume_claim_template: self
                        .optional_template(op, "persistentVolumeClaimTemplatePath")?,
                    pod_groups: None,
                    indexed_template,
                })])
            }
            "createPodGroups" => {
                let path = op["templatePath"]
                    .as_str()
                    .ok_or("createPodGroups: no templatePath")?;
                let namespace = op["namespace"]
                    .as_str()
                    .ok_or("createPodGroups: no namespace")?;
                let count = self.count(op)?;
                let params = self.template_params(op)?;
                Ok(vec![Op::CreateObjects(self.objects(
                    path,
                    count,
                    Some(namespace),
                    &params,
                )?)])
            }
            "waitForPodGroups" => Ok(Vec::new()),
            "createAny" => {
                let path = op["templatePath"]
                    .as_str()
                    .ok_or("createAny: no templatePath")?;
                let count = if op["countParam"].is_null() && op["count"].is_null() {
                    1
                } else {
                    self.count(op)?
                };
                let params = self.template_params(op)?;
                Ok(vec![Op::CreateObjects(self.objects(
                    path,
                    count,
                    op["namespace"].as_str(),
                    &params,
                )?)])
            }
            "deletePods" => {
                let namespace = op["namespace"].as_str().ok_or("deletePods: no namespace")?;
                let labels = op["labelSelector"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(vec![Op::DeletePods(DeletePods {
                    namespace: namespace.to_string(),
                    labels,
                    count: None,
                })])
            }
            "barrier" => Ok(vec![Op::Barrier(Barrier::default())]),
            "sleep" => {
                let text = op["duration"].as_str().ok_or("sleep: no duration")?;
                let d = kubesched_config::duration::parse(text)
                    .map_err(|e| format!("sleep: duration {text}: {e}"))?;
                Ok(vec![Op::AdvanceClock(AdvanceClock {
                    seconds: d.as_secs().max(1),
                })])
            }
            "startCollectingMetrics" | "stopCollectingMetrics" => refuse(
                "a measurement window (kubesched measures the createPods ops with collectMetrics)",
            ),
            other => Err(format!("opcode {other} is not supported by kubesched")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
- name: SchedulingBasic
  defaultPodTemplatePath: templates/pod-default.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  - opcode: createPods
    countParam: $initPods
  - opcode: createPods
    countParam: $measurePods
    collectMetrics: true
  workloads:
  - name: 5Nodes
    labels: [integration-test, fast]
    params: {initNodes: 5, initPods: 5, measurePods: 10}
  - name: 5000Nodes
    labels: [performance]
    params: {initNodes: 5000, initPods: 1000, measurePods: 1000}
    threshold: 270
- name: SchedulingWithMetricWindows
  featureGates: {SchedulerQueueingHints: true}
  workloadTemplate:
  - opcode: createNodes
    count: 2
  - opcode: startCollectingMetrics
  workloads:
  - name: 2Nodes
    params: {}
"#;

    fn cases() -> Vec<PerfCase> {
        let dir = std::env::temp_dir().join(format!("kubesched-perf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("templates")).expect("tmp");
        std::fs::write(
            dir.join("templates/pod-default.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: pod-\nspec:\n  containers:\n  - image: registry.k8s.io/pause:3.10.1\n    name: pause\n    resources:\n      requests: {cpu: 100m, memory: 500Mi}\n",
        )
        .expect("write");
        parse(CONFIG, "performance-config.yaml", &dir).expect("parses")
    }

    #[test]
    fn params_templates_and_metrics_become_a_workload() {
        let cases = cases();
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "SchedulingBasic/5Nodes",
                "SchedulingBasic/5000Nodes",
                "SchedulingWithMetricWindows/2Nodes"
            ]
        );
        assert_eq!(cases[1].threshold, Some(270.0));
        assert_eq!(cases[0].labels, ["integration-test", "fast"]);
        let w = cases[0].workload.as_ref().expect("runs");
        let [
            Op::CreateNodes(nodes),
            Op::CreatePods(init),
            Op::CreatePods(measured),
        ] = w.ops.as_slice()
        else {
            panic!("{:?}", w.ops);
        };
        assert_eq!(nodes.count, 5);
        assert_eq!((init.count, init.measure), (5, false));
        assert_eq!((measured.count, measured.measure), (10, true));
        // Upstream's default namespaces: namespace-<op index>.
        assert_eq!(init.namespace.as_deref(), Some("namespace-1"));
        assert_eq!(measured.namespace.as_deref(), Some("namespace-2"));
        let template = measured
            .template
            .as_ref()
            .expect("the test case's default pod");
        assert_eq!(
            template["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "100m"
        );
    }

    #[test]
    fn what_kubesched_cannot_run_is_named_not_dropped() {
        let cases = cases();
        let refused = &cases[2];
        assert_eq!(
            refused.feature_gates,
            BTreeMap::from([("SchedulerQueueingHints".to_string(), true)])
        );
        let why = refused.workload.as_ref().expect_err("refused");
        assert!(
            why.starts_with("workloadTemplate[1]: startCollectingMetrics"),
            "{why}"
        );
        let missing = parse(
            "- name: X\n  workloadTemplate:\n  - opcode: createNodes\n    countParam: $n\n  workloads:\n  - name: w\n    params: {}\n",
            "f.yaml",
            Path::new("."),
        )
        .expect("parses");
        assert_eq!(
            missing[0].workload.as_ref().expect_err("no param"),
            "workloadTemplate[0]: parameter $n is not defined"
        );
        assert!(parse("name: not a list", "f.yaml", Path::new(".")).is_err());
    }

    #[test]
    fn pod_groups_and_indexed_pods_are_rendered_from_go_templates() {
        let dir = std::env::temp_dir().join(format!("kubesched-perf-pg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        std::fs::write(
            dir.join("pg.yaml"),
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata:\n  name: g-{{.Index}}\nspec:\n  schedulingPolicy:\n    gang:\n      minCount: {{.size}}\n",
        )
        .expect("write");
        std::fs::write(
            dir.join("pod.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-{{.Index}}\nspec:\n  schedulingGroup:\n    podGroupName: g-{{DivideInt .Index .size}}\n  containers:\n  - name: c\n    image: i\n",
        )
        .expect("write");
        let config = "- name: G\n  featureGates: {GenericWorkload: true}\n  workloadTemplate:\n  - opcode: createPodGroups\n    countParam: $groups\n    namespace: ns\n    templatePath: pg.yaml\n    templateParams: {size: $size}\n  - opcode: createPods\n    countParam: $groups\n    countMultiplierParam: $size\n    namespace: ns\n    podTemplatePath: pod.yaml\n    collectMetrics: true\n    templateParams: {size: $size}\n  workloads:\n  - name: w\n    params: {groups: 2, size: 3}\n    featureGates: {TopologyAwareWorkloadScheduling: true}\n";
        let cases = parse(config, "f.yaml", &dir).expect("parses");
        let w = cases[0].workload.as_ref().expect("runs");
        assert_eq!(
            w.feature_gates,
            BTreeMap::from([
                ("GenericWorkload".to_string(), true),
                ("TopologyAwareWorkloadScheduling".to_string(), true)
            ])
        );
        let [Op::CreateObjects(groups), Op::CreatePods(pods)] = w.ops.as_slice() else {
            panic!("{:?}", w.ops);
        };
        let names: Vec<&str> = groups
            .iter()
            .filter_map(|g| g["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["g-0", "g-1"]);
        assert_eq!(groups[1]["metadata"]["namespace"], "ns");
        assert_eq!(groups[1]["spec"]["schedulingPolicy"]["gang"]["minCount"], 3);
        assert_eq!(pods.count, 6);
        let indexed = pods.indexed_template.as_ref().expect("per pod");
        let pod = indexed.pod(4, 6).expect("renders");
        assert_eq!(pod.metadata.name.as_deref(), Some("p-4"));
        let group = pod
            .spec
            .and_then(|s| s.scheduling_group)
            .and_then(|g| g.pod_group_name);
        assert_eq!(group.as_deref(), Some("g-1"));
    }
}
