//! Field selectors as the API server evaluates them for the fields it supports.

use serde_json::Value;

/// One `field=value` / `field!=value` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The field path, e.g. `status.phase`.
    pub field: String,
    /// True for `!=`.
    pub negated: bool,
    /// The value compared with.
    pub value: String,
}

/// A parsed field selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<Requirement>);

/// The fields a resource's selector may use (as the real API server's field label
/// conversion functions allow).
fn supported(resource: &str, field: &str) -> bool {
    match field {
        "metadata.name" | "metadata.namespace" => true,
        "spec.nodeName"
        | "spec.schedulerName"
        | "status.phase"
        | "spec.restartPolicy"
        | "spec.serviceAccountName"
        | "status.podIP"
        | "status.nominatedNodeName" => resource == "pods",
        "spec.unschedulable" => resource == "nodes",
        _ => false,
    }
}

impl FieldSelector {
    /// Parses `a=b,c!=d` for `resource`; an unsupported field is an error, as upstream's
    /// "field label not supported".
    pub fn parse(resource: &str, text: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, negated, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, false, v)
            } else {
                return Err(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            if !supported(resource, field) {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push(Requirement {
                field: field.to_string(),
                negated,
                value: value.trim().to_string(),
            });
        }
        Ok(Self(reqs))
    }

    /// Whether the object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|r| {
            let mut v = obj;
            for part in r.field.split('.') {
                v = v.get(part).unwrap_or(&Value::Null);
            }
            let actual = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == r.value) != r.negated
        })
    }
}

#[cfg(test)]
mod tests {
    use super::FieldSelector;
    use serde_json::json;

    #[test]
    fn pod_phase_selector_as_the_scheduler_sends_it() {
        let s = FieldSelector::parse("pods", "status.phase!=Succeeded,status.phase!=Failed")
            .expect("valid");
        assert!(s.matches(&json!({"status": {"phase": "Running"}})));
        assert!(s.matches(&json!({"metadata": {"name": "no status yet"}})));
        assert!(!s.matches(&json!({"status": {"phase": "Succeeded"}})));
        assert!(!s.matches(&json!({"status": {"phase": "Failed"}})));
    }

    #[test]
    fn unsupported_fields_are_refused() {
        let err =
            FieldSelector::parse("nodes", "status.phase=Running").expect_err("not a node field");
        assert_eq!(err, "field label not supported: status.phase");
    }
}
