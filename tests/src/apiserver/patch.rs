//! JSON merge patch (RFC 7386) and the part of strategic merge patch the scheduler's
//! objects use: maps merge recursively, `null` removes a key, and lists with a patch merge
//! key (pod conditions by `type`, ...) merge element by element; other lists are replaced.

use serde_json::Value;

/// The merge key of a list field, for strategic merge patches.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "conditions" => Some("type"),
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" => Some("name"),
        "containerStatuses" | "initContainerStatuses" => Some("name"),
        "tolerations" => None,
        "ownerReferences" => Some("uid"),
        // ResourceClaim status.reservedFor is keyed by the consumer UID.
        "reservedFor" => Some("uid"),
        _ => None,
    }
}

/// Applies `patch` to `target`; `strategic` turns on list merging by merge key.
pub fn apply(target: &mut Value, patch: &Value, strategic: bool) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(t) = target else {
        return;
    };
    for (k, v) in p {
        if strategic && k.starts_with('$') {
            // Directives such as $setElementOrder/conditions: order only, ignored here.
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(existing @ Value::Object(_)), Value::Object(_)) => apply(existing, v, strategic),
            (Some(Value::Array(existing)), Value::Array(items)) if strategic => {
                match merge_key(k) {
                    Some(key) => merge_list(existing, items, key),
                    None => *existing = items.clone(),
                }
            }
            _ => {
                let mut fresh = Value::Null;
                if v.is_object() {
                    apply(&mut fresh, v, strategic);
                } else {
                    fresh = v.clone();
                }
                t.insert(k.clone(), fresh);
            }
        }
    }
}

fn merge_list(existing: &mut Vec<Value>, items: &[Value], key: &str) {
    for item in items {
        let id = item.get(key).cloned();
        let deleting = item.get("$patch").and_then(Value::as_str) == Some("delete");
        let pos = id
            .as_ref()
            .and_then(|id| existing.iter().position(|e| e.get(key) == Some(id)));
        match (pos, deleting) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (Some(i), false) => apply(&mut existing[i], item, true),
            (None, true) => {}
            (None, false) => {
                let mut fresh = Value::Null;
                apply(&mut fresh, item, true);
                existing.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::apply;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_conditions_by_type() {
        let mut status = json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
            {"type": "DisruptionTarget", "status": "True"},
        ]});
        apply(
            &mut status,
            &json!({"conditions": [{"type": "PodScheduled", "status": "True", "reason": null}], "nominatedNodeName": "n1"}),
            true,
        );
        assert_eq!(
            status,
            json!({"phase": "Pending", "nominatedNodeName": "n1", "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "DisruptionTarget", "status": "True"},
            ]})
        );
    }

    #[test]
    fn merge_patch_replaces_lists_and_null_removes() {
        let mut obj = json!({"a": [1, 2], "b": {"c": 1, "d": 2}});
        apply(&mut obj, &json!({"a": [3], "b": {"c": null}}), false);
        assert_eq!(obj, json!({"a": [3], "b": {"d": 2}}));
    }
}
