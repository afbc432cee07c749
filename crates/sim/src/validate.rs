//! Checks an API server makes before it stores an object, for the fields the scheduler
//! reads: what a real cluster could never hold is refused here with the API server's
//! words (`spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be
//! greater than or equal to 0`), instead of surfacing later as odd scores or retries.

use std::fmt;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// One refused field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.topologySpreadConstraints[0].maxSkew`.
    pub field: String,
    /// The API server's message, e.g. `Invalid value: 0: must be greater than zero`.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// What an API server would refuse in a pod, in field order.
pub fn pod(pod: &api::Pod) -> Vec<FieldError> {
    let mut e = Errors::default();
    let Some(spec) = &pod.spec else {
        return e.0;
    };
    for (list, containers) in [
        (
            "spec.initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("spec.containers", &spec.containers[..]),
    ] {
        for (i, c) in containers.iter().enumerate() {
            let at = format!("{list}[{i}]");
            if let Some(r) = &c.resources {
                e.quantities(&format!("{at}.resources.requests"), r.requests.as_ref());
                e.quantities(&format!("{at}.resources.limits"), r.limits.as_ref());
            }
            for (j, port) in c.ports.iter().flatten().enumerate() {
                let at = format!("{at}.ports[{j}]");
                if !(1..=65535).contains(&port.container_port) {
                    e.port(&format!("{at}.containerPort"), port.container_port);
                }
                if let Some(h) = port.host_port
                    && !(0..=65535).contains(&h)
                {
                    e.port(&format!("{at}.hostPort"), h);
                }
            }
        }
    }
    if let Some(r) = &spec.resources {
        e.quantities("spec.resources.requests", r.requests.as_ref());
        e.quantities("spec.resources.limits", r.limits.as_ref());
    }
    e.quantities("spec.overhead", spec.overhead.as_ref());
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        e.toleration(&format!("spec.tolerations[{i}]"), t);
    }
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        e.spread(&format!("spec.topologySpreadConstraints[{i}]"), c);
    }
    if let Some(a) = &spec.affinity {
        e.affinity(a);
    }
    e.0
}

/// What an API server would refuse in a node.
pub fn node(node: &api::Node) -> Vec<FieldError> {
    let mut e = Errors::default();
    if let Some(spec) = &node.spec {
        for (i, t) in spec.taints.iter().flatten().enumerate() {
            let at = format!("spec.taints[{i}].effect");
            if t.effect.is_empty() {
                e.push(&at, "Required value".into());
            } else if !EFFECTS.contains(&t.effect.as_str()) {
                e.unsupported(&at, &t.effect, EFFECTS);
            }
        }
    }
    if let Some(status) = &node.status {
        e.quantities("status.capacity", status.capacity.as_ref());
        e.quantities("status.allocatable", status.allocatable.as_ref());
    }
    e.0
}

/// What an API server would refuse in another object (as raw JSON): the sizes the
/// volume plugins read.
pub fn other(kind: &str, doc: &serde_json::Value) -> Vec<FieldError> {
    let mut e = Errors::default();
    let path = match kind {
        "PersistentVolume" => &["spec", "capacity"][..],
        "PersistentVolumeClaim" => &["spec", "resources", "requests"][..],
        _ => return e.0,
    };
    let map = path
        .iter()
        .try_fold(doc, |v, k| v.get(k))
        .and_then(|v| v.as_object());
    for (name, value) in map.into_iter().flatten() {
        if let Some(text) = value.as_str() {
            e.quantity(&format!("{}[{name}]", path.join(".")), text);
        }
    }
    e.0
}

const EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "PreferNoSchedule"];
const WHEN_UNSATISFIABLE: &[&str] = &["DoNotSchedule", "ScheduleAnyway"];
const POLICIES: &[&str] = &["Honor", "Ignore"];

#[derive(Default)]
struct Errors(Vec<FieldError>);

fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Errors {
    fn push(&mut self, field: &str, message: String) {
        self.0.push(FieldError {
            field: field.to_string(),
            message,
        });
    }

    fn unsupported(&mut self, field: &str, value: &str, supported: &[&str]) {
        self.push(
            field,
            format!(
                "Unsupported value: {value:?}: supported values: {}",
                quoted(supported)
            ),
        );
    }

    fn quantity(&mut self, field: &str, text: &str) {
        // Text that does not parse is the model's to report (with the same field).
        if let Ok(q) = kubesched_model::Quantity::parse(text)
            && q.nanos() < 0
        {
            self.push(
                field,
                format!("Invalid value: {text:?}: must be greater than or equal to 0"),
            );
        }
    }

    fn quantities(&mut self, at: &str, map: Option<&BTreeMap<String, Quantity>>) {
        for (name, q) in map.into_iter().flatten() {
            self.quantity(&format!("{at}[{name}]"), &q.0);
        }
    }

    fn port(&mut self, field: &str, port: i32) {
        self.push(
            field,
            format!("Invalid value: {port}: must be between 1 and 65535, inclusive"),
        );
    }

    fn toleration(&mut self, at: &str, t: &api::Toleration) {
        let key = t.key.as_deref().unwrap_or_default();
        let operator = t.operator.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        match operator {
            "" | "Equal" if key.is_empty() => self.push(
                &format!("{at}.operator"),
                format!("Invalid value: {operator:?}: operator must be Exists when `key` is empty, which means \"match all values and all keys\""),
            ),
            "" | "Equal" => {}
            "Exists" if !value.is_empty() => self.push(
                &format!("{at}.operator"),
                format!("Invalid value: {value:?}: value must be empty when `operator` is 'Exists'"),
            ),
            "Exists" => {}
            other => self.unsupported(&format!("{at}.operator"), other, &["Equal", "Exists"]),
        }
        let effect = t.effect.as_deref().unwrap_or_default();
        if !effect.is_empty() && !EFFECTS.contains(&effect) {
            self.unsupported(&format!("{at}.effect"), effect, EFFECTS);
        }
    }

    fn spread(&mut self, at: &str, c: &api::TopologySpreadConstraint) {
        if c.max_skew <= 0 {
            self.push(
                &format!("{at}.maxSkew"),
                format!("Invalid value: {}: must be greater than zero", c.max_skew),
            );
        }
        if c.topology_key.is_empty() {
            self.push(
                &format!("{at}.topologyKey"),
                "Required value: can not be empty".into(),
            );
        }
        let when = c.when_unsatisfiable.as_str();
        if !WHEN_UNSATISFIABLE.contains(&when) {
            self.unsupported(&format!("{at}.whenUnsatisfiable"), when, WHEN_UNSATISFIABLE);
        }
        if let Some(min) = c.min_domains {
            if min <= 0 {
                self.push(
                    &format!("{at}.minDomains"),
                    format!("Invalid value: {min}: must be greater than zero"),
                );
            } else if when != "DoNotSchedule" {
                self.push(
                    &format!("{at}.minDomains"),
                    format!("Invalid value: {min}: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}"),
                );
            }
        }
        for (field, policy) in [
            ("nodeAffinityPolicy", &c.node_affinity_policy),
            ("nodeTaintsPolicy", &c.node_taints_policy),
        ] {
            if let Some(p) = policy
                && !POLICIES.contains(&p.as_str())
            {
                self.unsupported(&format!("{at}.{field}"), p, POLICIES);
            }
        }
        if let Some(s) = &c.label_selector {
            self.label_selector(&format!("{at}.labelSelector"), s);
        }
    }

    fn label_selector(&mut self, at: &str, s: &LabelSelector) {
        for (i, r) in s.match_expressions.iter().flatten().enumerate() {
            let at = format!("{at}.matchExpressions[{i}]");
            let values = r.values.as_deref().unwrap_or_default();
            match r.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => self.push(
                    &format!("{at}.values"),
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'".into(),
                ),
                "Exists" | "DoesNotExist" if !values.is_empty() => self.push(
                    &format!("{at}.values"),
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                        .into(),
                ),
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => self.push(
                    &format!("{at}.operator"),
                    format!("Invalid value: {other:?}: not a valid selector operator"),
                ),
            }
        }
    }

    fn node_selector_term(&mut self, at: &str, term: &api::NodeSelectorTerm) {
        for (i, r) in term.match_expressions.iter().flatten().enumerate() {
            let at = format!("{at}.matchExpressions[{i}]");
            let values = r.values.as_deref().unwrap_or_default();
            match r.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => self.push(
                    &format!("{at}.values"),
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'".into(),
                ),
                "Exists" | "DoesNotExist" if !values.is_empty() => self.push(
                    &format!("{at}.values"),
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                        .into(),
                ),
                "Gt" | "Lt" if values.len() != 1 => self.push(
                    &format!("{at}.values"),
                    "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
                        .into(),
                ),
                "Gt" | "Lt" if values[0].parse::<i64>().is_err() => self.push(
                    &format!("{at}.values[0]"),
                    format!("Invalid value: {:?}: must be an integer", values[0]),
                ),
                "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
                other => self.push(
                    &format!("{at}.operator"),
                    format!("Invalid value: {other:?}: not a valid selector operator"),
                ),
            }
        }
        for (i, r) in term.match_fields.iter().flatten().enumerate() {
            let at = format!("{at}.matchFields[{i}]");
            let values = r.values.as_deref().unwrap_or_default();
            match r.operator.as_str() {
                "In" | "NotIn" if values.len() != 1 => self.push(
                    &format!("{at}.values"),
                    "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector".into(),
                ),
                "In" | "NotIn" => {}
                other => self.unsupported(&format!("{at}.operator"), other, &["In", "NotIn"]),
            }
        }
    }

    fn weight(&mut self, field: &str, weight: i32) {
        if !(1..=100).contains(&weight) {
            self.push(
                field,
                format!("Invalid value: {weight}: must be in the range 1-100"),
            );
        }
    }

    fn pod_affinity_term(&mut self, at: &str, term: &api::PodAffinityTerm) {
        if term.topology_key.is_empty() {
            self.push(
                &format!("{at}.topologyKey"),
                "Required value: can not be empty".into(),
            );
        }
        if let Some(s) = &term.label_selector {
            self.label_selector(&format!("{at}.labelSelector"), s);
        }
        if let Some(s) = &term.namespace_selector {
            self.label_selector(&format!("{at}.namespaceSelector"), s);
        }
    }

    fn affinity(&mut self, a: &api::Affinity) {
        const AT: &str = "spec.affinity";
        if let Some(n) = &a.node_affinity {
            let at = format!("{AT}.nodeAffinity");
            if let Some(req) = &n.required_during_scheduling_ignored_during_execution {
                for (i, term) in req.node_selector_terms.iter().enumerate() {
                    self.node_selector_term(
                        &format!("{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"),
                        term,
                    );
                }
            }
            for (i, p) in n
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .enumerate()
            {
                let at = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
                self.weight(&format!("{at}.weight"), p.weight);
                self.node_selector_term(&format!("{at}.preference"), &p.preference);
            }
        }
        for (name, required, preferred) in [
            (
                "podAffinity",
                a.pod_affinity.as_ref().and_then(|p| {
                    p.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
                a.pod_affinity.as_ref().and_then(|p| {
                    p.preferred_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
            ),
            (
                "podAntiAffinity",
                a.pod_anti_affinity.as_ref().and_then(|p| {
                    p.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
                a.pod_anti_affinity.as_ref().and_then(|p| {
                    p.preferred_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
            ),
        ] {
            let at = format!("{AT}.{name}");
            for (i, term) in required.into_iter().flatten().enumerate() {
                self.pod_affinity_term(
                    &format!("{at}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
                    term,
                );
            }
            for (i, p) in preferred.into_iter().flatten().enumerate() {
                let at = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
                self.weight(&format!("{at}.weight"), p.weight);
                self.pod_affinity_term(&format!("{at}.podAffinityTerm"), &p.pod_affinity_term);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::load::{Manifests, load_text};

    /// Loads one object (YAML); returns `field: message` of each problem, and whether
    /// the object was kept (a pod refused is kept aside as invalid).
    fn check(object: &str, expect: &[&str]) {
        let mut m = Manifests::default();
        let mut problems = Vec::new();
        load_text(object, "f.yaml", &mut m, &mut problems);
        let got: Vec<String> = problems
            .iter()
            .map(|p| format!("{}: {}", p.field.as_deref().unwrap_or("-"), p.message))
            .collect();
        assert_eq!(got, expect, "{object}");
        if expect.is_empty() {
            assert!(m.invalid_pods.is_empty());
            return;
        }
        assert!(
            m.pods.is_empty() && m.nodes.is_empty() && m.others.is_empty(),
            "{object}"
        );
        if object.contains("kind: Pod") {
            assert_eq!(m.invalid_pods.len(), 1);
            assert_eq!(m.invalid_pods[0].message, expect[0]);
        }
    }

    fn pod(spec: &str) -> String {
        format!("kind: Pod\nmetadata: {{name: p}}\nspec:\n{spec}")
    }

    const CONTAINER: &str = "  containers:\n  - name: c\n";

    #[test]
    fn quantities_are_not_negative() {
        check(
            &pod(
                "  containers:\n  - name: c\n    resources: {requests: {cpu: \"-1\"}, limits: {memory: -1Gi}}\n",
            ),
            &[
                "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.containers[0].resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            ],
        );
        check(
            &pod(
                "  initContainers:\n  - name: i\n    resources: {requests: {cpu: -100m}}\n  containers: [{name: c}]\n",
            ),
            &[
                "spec.initContainers[0].resources.requests[cpu]: Invalid value: \"-100m\": must be greater than or equal to 0",
            ],
        );
        check(
            &pod(&format!("{CONTAINER}  overhead: {{cpu: \"-250m\"}}\n")),
            &["spec.overhead[cpu]: Invalid value: \"-250m\": must be greater than or equal to 0"],
        );
        check(
            "kind: Node\nmetadata: {name: n0}\nstatus: {allocatable: {cpu: \"-4\"}}\n",
            &["status.allocatable[cpu]: Invalid value: \"-4\": must be greater than or equal to 0"],
        );
        check(
            "kind: PersistentVolume\napiVersion: v1\nmetadata: {name: pv}\nspec: {capacity: {storage: -1Gi}}\n",
            &[
                "spec.capacity[storage]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            ],
        );
        check(
            &pod("  containers:\n  - name: c\n    resources: {requests: {cpu: \"0\"}}\n"),
            &[],
        );
    }

    #[test]
    fn topology_spread_constraints() {
        let spread = |c: &str| {
            pod(&format!(
                "{CONTAINER}  topologySpreadConstraints:\n  - {c}\n"
            ))
        };
        let at = "spec.topologySpreadConstraints[0]";
        check(
            &spread("{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}"),
            &[&format!(
                "{at}.maxSkew: Invalid value: 0: must be greater than zero"
            )],
        );
        check(
            &spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Foo}"),
            &[&format!(
                "{at}.whenUnsatisfiable: Unsupported value: \"Foo\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\""
            )],
        );
        check(
            &spread("{maxSkew: 1, topologyKey: \"\", whenUnsatisfiable: DoNotSchedule}"),
            &[&format!(
                "{at}.topologyKey: Required value: can not be empty"
            )],
        );
        check(
            &spread(
                "{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}",
            ),
            &[&format!(
                "{at}.minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"
            )],
        );
        check(
            &spread(
                "{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, minDomains: 0}",
            ),
            &[&format!(
                "{at}.minDomains: Invalid value: 0: must be greater than zero"
            )],
        );
        check(
            &spread(
                "{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchExpressions: [{key: a, operator: Is}]}}",
            ),
            &[&format!(
                "{at}.labelSelector.matchExpressions[0].operator: Invalid value: \"Is\": not a valid selector operator"
            )],
        );
        check(
            &spread(
                "{maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, minDomains: 3}",
            ),
            &[],
        );
    }

    #[test]
    fn tolerations() {
        let tol = |t: &str| pod(&format!("{CONTAINER}  tolerations: [{t}]\n"));
        check(
            &tol("{key: k, operator: Maybe}"),
            &[
                "spec.tolerations[0].operator: Unsupported value: \"Maybe\": supported values: \"Equal\", \"Exists\"",
            ],
        );
        check(
            &tol("{key: k, operator: Exists, value: v}"),
            &[
                "spec.tolerations[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'",
            ],
        );
        check(
            &tol("{key: k, value: v, effect: NoWay}"),
            &[
                "spec.tolerations[0].effect: Unsupported value: \"NoWay\": supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\"",
            ],
        );
        check(
            &tol("{operator: Equal, value: v}"),
            &[
                "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ],
        );
        check(
            &tol("{operator: Exists}, {key: k, value: v, effect: NoExecute, tolerationSeconds: 5}"),
            &[],
        );
    }

    #[test]
    fn node_affinity() {
        let term = |e: &str| {
            pod(&format!(
                "{CONTAINER}  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - {e}\n"
            ))
        };
        let at = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]";
        check(
            &term("matchExpressions: [{key: a, operator: Near, values: [x]}]"),
            &[&format!(
                "{at}.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator"
            )],
        );
        check(
            &term("matchExpressions: [{key: a, operator: In}]"),
            &[&format!(
                "{at}.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            )],
        );
        check(
            &term("matchExpressions: [{key: a, operator: Exists, values: [x]}]"),
            &[&format!(
                "{at}.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )],
        );
        check(
            &term("matchExpressions: [{key: a, operator: Gt, values: [\"1\", \"2\"]}]"),
            &[&format!(
                "{at}.matchExpressions[0].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            )],
        );
        check(
            &term("matchExpressions: [{key: a, operator: Lt, values: [x]}]"),
            &[&format!(
                "{at}.matchExpressions[0].values[0]: Invalid value: \"x\": must be an integer"
            )],
        );
        check(
            &term("matchFields: [{key: metadata.name, operator: Exists}]"),
            &[&format!(
                "{at}.matchFields[0].operator: Unsupported value: \"Exists\": supported values: \"In\", \"NotIn\""
            )],
        );
        check(
            &term("matchExpressions: [{key: a, operator: Gt, values: [\"3\"]}]"),
            &[],
        );
    }

    #[test]
    fn pod_affinity_terms_and_ports() {
        check(
            &pod(&format!(
                "{CONTAINER}  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {{topologyKey: \"\", labelSelector: {{matchLabels: {{a: b}}}}}}\n"
            )),
            &[
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty",
            ],
        );
        check(
            &pod(&format!(
                "{CONTAINER}  affinity:\n    podAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n      - {{weight: 0, podAffinityTerm: {{topologyKey: zone}}}}\n"
            )),
            &[
                "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
            ],
        );
        check(
            &pod(
                "  containers:\n  - name: c\n    ports: [{containerPort: 0}, {containerPort: 80, hostPort: 70000}, {containerPort: 81, hostPort: 0}]\n",
            ),
            &[
                "spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive",
                "spec.containers[0].ports[1].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ],
        );
        check(
            "kind: Node\nmetadata: {name: n0}\nspec: {taints: [{key: k, effect: Sometimes}]}\n",
            &[
                "spec.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\"",
            ],
        );
    }
}
