//! Generated cluster dumps for the load benchmark: nodes and pods written the way
//! `kubectl get nodes,pods -A -o yaml|json` writes them (keys sorted, managedFields,
//! owners, status with conditions, container statuses and images), in the three shapes
//! a dump comes in.
//!
//! The objects are built as JSON values and written one at a time, so a dump of any size
//! is generated in constant memory.

use std::io::{self, Write};

use serde_json::{Value, json};

/// How a dump is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DumpShape {
    /// One YAML document per object, separated by `---` (`kubectl get -o yaml` of
    /// several files concatenated, or a GitOps folder flattened).
    Documents,
    /// One `kind: List` YAML document (`kubectl get nodes,pods -A -o yaml`).
    ListYaml,
    /// One `kind: List` JSON object (`kubectl get nodes,pods -A -o json`).
    ListJson,
}

impl DumpShape {
    /// Every shape, in the order the benchmark runs them.
    pub const ALL: [DumpShape; 3] = [Self::Documents, Self::ListYaml, Self::ListJson];

    /// The shape's name in results and file names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Documents => "documents",
            Self::ListYaml => "list-yaml",
            Self::ListJson => "list-json",
        }
    }

    /// The file extension a dump of this shape gets.
    pub fn extension(self) -> &'static str {
        match self {
            Self::ListJson => "json",
            _ => "yaml",
        }
    }
}

/// The cluster a dump describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpSpec {
    /// Nodes.
    pub nodes: usize,
    /// Pods; the first `bound_percent` percent of them are bound, spread evenly over the
    /// nodes, the rest are pending.
    pub pods: usize,
    /// Percentage of the pods that are bound (90 in the benchmark).
    pub bound_percent: usize,
}

impl DumpSpec {
    /// Pods with `spec.nodeName`.
    pub fn bound(&self) -> usize {
        self.pods * self.bound_percent.min(100) / 100
    }

    /// Pods without.
    pub fn pending(&self) -> usize {
        self.pods - self.bound()
    }
}

const NAMESPACES: usize = 40;
/// Pods per Deployment (and so per ReplicaSet owner and label set).
const REPLICAS: usize = 25;
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const TIME: &str = "2026-11-30T08:00:00Z";

/// Writes the dump in `shape` to `out`.
pub fn write_dump(spec: &DumpSpec, shape: DumpShape, out: &mut impl Write) -> io::Result<()> {
    let objects = (0..spec.nodes)
        .map(node)
        .chain((0..spec.pods).map(|i| pod(spec, i)));
    match shape {
        DumpShape::Documents => {
            for (i, object) in objects.enumerate() {
                if i > 0 {
                    out.write_all(b"---\n")?;
                }
                write_yaml_mapping(out, &object, 0)?;
            }
        }
        DumpShape::ListYaml => {
            out.write_all(b"apiVersion: v1\nitems:\n")?;
            for object in objects {
                write_yaml_item(out, &object, 0)?;
            }
            out.write_all(b"kind: List\nmetadata:\n  resourceVersion: \"\"\n")?;
        }
        DumpShape::ListJson => {
            out.write_all(b"{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n")?;
            for (i, object) in objects.enumerate() {
                if i > 0 {
                    out.write_all(b",\n")?;
                }
                let text = serde_json::to_string_pretty(&object).map_err(io::Error::other)?;
                // kubectl indents by four spaces; items sit two levels in.
                for (n, line) in text.lines().enumerate() {
                    if n > 0 {
                        out.write_all(b"\n")?;
                    }
                    out.write_all(b"        ")?;
                    out.write_all(line.as_bytes())?;
                }
            }
            out.write_all(
                b"\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n",
            )?;
        }
    }
    Ok(())
}

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

fn uid(kind: u32, i: usize) -> String {
    format!(
        "{kind:08x}-{:04x}-4{:03x}-8{:03x}-{i:012x}",
        i >> 16,
        i & 0xfff,
        (i >> 4) & 0xfff
    )
}

fn node(i: usize) -> Value {
    let name = node_name(i);
    let zone = ZONES[i % ZONES.len()];
    let images: Vec<Value> = (0..12)
        .map(|k| {
            json!({
                "names": [
                    format!("registry.example.com/team-{}/service-{k}@sha256:{:064x}", k % 4, k * 7919 + 11),
                    format!("registry.example.com/team-{}/service-{k}:v1.{k}.0", k % 4),
                ],
                "sizeBytes": 20_000_000 + k * 3_100_000,
            })
        })
        .collect();
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({
            "lastHeartbeatTime": TIME, "lastTransitionTime": TIME,
            "message": message, "reason": reason, "status": status, "type": kind,
        })
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": TIME,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.8xlarge",
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": zone,
            },
            "managedFields": [
                {
                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:volumes.kubernetes.io/controller-managed-attach-detach": {}},
                        "f:labels": {".": {}, "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {}, "f:kubernetes.io/os": {}}},
                        "f:spec": {"f:providerID": {}}},
                    "manager": "kubelet", "operation": "Update", "time": TIME,
                },
                {
                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}, "f:memory": {}}, "f:conditions": {"k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}, "f:status": {}}},
                        "f:images": {}, "f:nodeInfo": {"f:bootID": {}}}},
                    "manager": "kubelet", "operation": "Update", "subresource": "status", "time": TIME,
                },
            ],
            "name": name,
            "resourceVersion": format!("{}", 1000 + i),
            "uid": uid(0x6e6f6465, i),
        },
        "spec": {
            "podCIDR": format!("10.{}.{}.0/24", 64 + i / 256, i % 256),
            "podCIDRs": [format!("10.{}.{}.0/24", 64 + i / 256, i % 256)],
            "providerID": format!("aws:///{zone}/i-{i:017x}"),
        },
        "status": {
            "addresses": [
                {"address": format!("10.0.{}.{}", i / 256, i % 256), "type": "InternalIP"},
                {"address": name, "type": "Hostname"},
            ],
            "allocatable": {"cpu": "31850m", "ephemeral-storage": "95551679124", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": "127322800Ki", "pods": "110"},
            "capacity": {"cpu": "32", "ephemeral-storage": "103680236Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": "130468528Ki", "pods": "110"},
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64", "bootID": uid(0x626f6f74, i),
                "containerRuntimeVersion": "containerd://2.1.4", "kernelVersion": "6.8.0-1021-aws",
                "kubeProxyVersion": "", "kubeletVersion": "v1.37.0",
                "machineID": format!("{i:032x}"), "operatingSystem": "linux",
                "osImage": "Ubuntu 24.04.3 LTS", "systemUUID": uid(0x73797375, i),
            },
        },
    })
}

fn pod(spec: &DumpSpec, i: usize) -> Value {
    let deployment = i / REPLICAS;
    let namespace = format!("team-{:02}", deployment % NAMESPACES);
    let app = format!("service-{deployment}");
    let hash = format!(
        "{:010x}",
        deployment.wrapping_mul(0x9e37_79b9) & 0xff_ffff_ffff
    );
    let hash = &hash[..10];
    let name = format!("{app}-{hash}-{:05x}", i % REPLICAS * 7919 % 0xfffff);
    let bound = i < spec.bound();
    let node = bound.then(|| node_name(i % spec.nodes.max(1)));
    let cpu = ["100m", "250m", "500m", "50m"][deployment % 4];
    let memory = ["128Mi", "256Mi", "512Mi", "64Mi"][deployment % 4];
    let image = format!(
        "registry.example.com/team-{}/service-{}:v1.{}.0",
        deployment % 4,
        deployment % 12,
        deployment % 12
    );
    let ready = if bound { "True" } else { "False" };
    let mut conditions = vec![json!({
        "lastProbeTime": null, "lastTransitionTime": TIME, "status": if bound { "True" } else { "False" },
        "type": "PodScheduled",
    })];
    if bound {
        for kind in [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
        ] {
            conditions.push(json!({"lastProbeTime": null, "lastTransitionTime": TIME, "status": ready, "type": kind}));
        }
    } else {
        conditions[0]["reason"] = json!("Unschedulable");
        conditions[0]["message"] = json!(
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
        );
    }
    let mut status = json!({
        "conditions": conditions,
        "phase": if bound { "Running" } else { "Pending" },
        "qosClass": "Burstable",
    });
    if bound {
        let n = i % spec.nodes.max(1);
        status["hostIP"] = json!(format!("10.0.{}.{}", n / 256, n % 256));
        status["hostIPs"] = json!([{"ip": format!("10.0.{}.{}", n / 256, n % 256)}]);
        status["podIP"] = json!(format!("10.{}.{}.{}", 64 + n / 256, n % 256, i % 250 + 2));
        status["podIPs"] =
            json!([{"ip": format!("10.{}.{}.{}", 64 + n / 256, n % 256, i % 250 + 2)}]);
        status["startTime"] = json!(TIME);
        status["containerStatuses"] = json!([{
            "containerID": format!("containerd://{:064x}", i * 31 + 7),
            "image": image, "imageID": format!("{image}@sha256:{:064x}", deployment * 13 + 5),
            "lastState": {}, "name": "app", "ready": true, "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": TIME}},
            "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access", "readOnly": true, "recursiveReadOnly": "Disabled"}],
        }]);
    }
    let mut pod_spec = json!({
        "containers": [{
            "env": [
                {"name": "SERVICE_NAME", "value": app},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            ],
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "livenessProbe": {"failureThreshold": 3, "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
            "name": "app",
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "resources": {"limits": {"memory": memory}, "requests": {"cpu": cpu, "memory": memory}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access", "readOnly": true}],
        }],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
        ],
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
            {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}},
        ]}}],
    });
    if let Some(node) = node {
        pod_spec["nodeName"] = json!(node);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": TIME,
            "generateName": format!("{app}-{hash}-"),
            "labels": {"app": app, "app.kubernetes.io/part-of": format!("team-{:02}", deployment % NAMESPACES), "pod-template-hash": hash},
            "managedFields": [
                {
                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                        "f:ownerReferences": {".": {}, "k:{\"uid\":\"0\"}": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}, "f:ports": {}, "f:resources": {}}},
                            "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:terminationGracePeriodSeconds": {}}},
                    "manager": "kube-controller-manager", "operation": "Update", "time": TIME,
                },
                {
                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}},
                        "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}},
                    "manager": "kubelet", "operation": "Update", "subresource": "status", "time": TIME,
                },
            ],
            "name": name,
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": true, "controller": true,
                "kind": "ReplicaSet", "name": format!("{app}-{hash}"), "uid": uid(0x72730000, deployment)}],
            "resourceVersion": format!("{}", 100_000 + i),
            "uid": uid(0x706f6400, i),
        },
        "spec": pod_spec,
        "status": status,
    })
}

/// A scalar as YAML: plain when it cannot be read as anything else, else double-quoted
/// (JSON's string syntax is YAML's double-quoted style).
fn yaml_scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
                && !s.starts_with(['-', '.'])
                && s.parse::<f64>().is_err()
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n" | "~"
                );
            if plain {
                s.clone()
            } else {
                Value::String(s.clone()).to_string()
            }
        }
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Object(m) if m.is_empty() => "{}".into(),
        // Collections are written by the callers.
        _ => String::new(),
    }
}

fn is_collection(v: &Value) -> bool {
    matches!(v, Value::Array(a) if !a.is_empty()) || matches!(v, Value::Object(m) if !m.is_empty())
}

fn indent(out: &mut impl Write, by: usize) -> io::Result<()> {
    for _ in 0..by {
        out.write_all(b" ")?;
    }
    Ok(())
}

fn yaml_key(key: &str) -> String {
    yaml_scalar(&Value::String(key.to_string()))
}

/// A mapping's entries at `depth` spaces, sorted by key (serde_json's map is ordered).
fn write_yaml_mapping(out: &mut impl Write, v: &Value, depth: usize) -> io::Result<()> {
    let Value::Object(m) = v else {
        indent(out, depth)?;
        return writeln!(out, "{}", yaml_scalar(v));
    };
    for (i, (k, value)) in m.iter().enumerate() {
        if i > 0 {
            indent(out, depth)?;
        }
        write_yaml_entry(out, k, value, depth)?;
    }
    Ok(())
}

/// `key: value`, the key already indented; a sequence under a key sits at the key's
/// indentation, as kubectl (go-yaml) writes it.
fn write_yaml_entry(
    out: &mut impl Write,
    key: &str,
    value: &Value,
    depth: usize,
) -> io::Result<()> {
    if !is_collection(value) {
        return writeln!(out, "{}: {}", yaml_key(key), yaml_scalar(value));
    }
    writeln!(out, "{}:", yaml_key(key))?;
    match value {
        Value::Array(items) => {
            for item in items {
                write_yaml_item(out, item, depth)?;
            }
            Ok(())
        }
        _ => {
            indent(out, depth + 2)?;
            write_yaml_mapping(out, value, depth + 2)
        }
    }
}

/// One `- item` of a sequence at `depth`.
fn write_yaml_item(out: &mut impl Write, item: &Value, depth: usize) -> io::Result<()> {
    indent(out, depth)?;
    out.write_all(b"- ")?;
    match item {
        Value::Object(m) if !m.is_empty() => write_yaml_mapping(out, item, depth + 2),
        Value::Array(a) if !a.is_empty() => {
            writeln!(out)?;
            for inner in a {
                write_yaml_item(out, inner, depth + 2)?;
            }
            Ok(())
        }
        _ => writeln!(out, "{}", yaml_scalar(item)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(spec: &DumpSpec, shape: DumpShape) -> String {
        let mut out = Vec::new();
        write_dump(spec, shape, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_shape_loads_every_object() {
        let spec = DumpSpec {
            nodes: 7,
            pods: 60,
            bound_percent: 90,
        };
        for shape in DumpShape::ALL {
            let text = dump(&spec, shape);
            let mut m = crate::Manifests::default();
            let mut problems = Vec::new();
            crate::load_text(&text, shape.name(), &mut m, &mut problems);
            assert!(problems.is_empty(), "{shape:?}: {problems:?}");
            assert_eq!(m.nodes.len(), 7, "{shape:?}");
            assert_eq!(m.pods.len(), 60, "{shape:?}");
            let bound = m
                .pods
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            assert_eq!(bound, 54, "{shape:?}");
        }
    }

    #[test]
    fn yaml_looks_like_kubectls() {
        let spec = DumpSpec {
            nodes: 1,
            pods: 1,
            bound_percent: 100,
        };
        let text = dump(&spec, DumpShape::ListYaml);
        assert!(text.starts_with("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Node\n"));
        assert!(
            text.contains("\n    managedFields:\n    - apiVersion: v1\n"),
            "{text}"
        );
        assert!(
            text.contains("\n    creationTimestamp: \"2026-11-30T08:00:00Z\"\n"),
            "{text}"
        );
        assert!(text.ends_with("kind: List\nmetadata:\n  resourceVersion: \"\"\n"));
    }

    #[test]
    fn scalars_that_would_read_as_something_else_are_quoted() {
        for (s, want) in [
            ("web", "web"),
            ("100m", "100m"),
            ("0", "\"0\""),
            ("true", "\"true\""),
            ("", "\"\""),
            ("a: b", "\"a: b\""),
            (
                "k:{\"type\":\"Ready\"}",
                "\"k:{\\\"type\\\":\\\"Ready\\\"}\"",
            ),
        ] {
            assert_eq!(yaml_scalar(&Value::String(s.into())), want);
        }
    }
}
