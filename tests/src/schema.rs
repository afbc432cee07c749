//! docs/report.schema.json, checked by a small validator of the keywords it uses (type,
//! enum, oneOf, minimum, required, properties, items and local `$ref`s).

use std::path::PathBuf;

use serde_json::Value;

fn schema() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/report.schema.json");
    let text = std::fs::read_to_string(&path).expect("docs/report.schema.json");
    serde_json::from_str(&text).expect("the schema is JSON")
}

fn type_matches(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        other => panic!("the schema uses type {other:?}, which this validator does not know"),
    }
}

/// Every way `value` breaks `schema`, as `path: what`.
fn validate(root: &Value, schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference
            .strip_prefix("#/$defs/")
            .expect("local references only");
        validate(root, &root["$defs"][name], value, path, errors);
        return;
    }
    if let Some(ty) = schema.get("type") {
        let types: Vec<&str> = match ty {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => panic!("bad type in schema at {path}"),
        };
        if !types.iter().any(|t| type_matches(value, t)) {
            errors.push(format!("{path}: expected {types:?}, got {value}"));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        errors.push(format!("{path}: {value} is not one of {options:?}"));
    }
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = options
            .iter()
            .filter(|s| {
                let mut e = Vec::new();
                validate(root, s, value, path, &mut e);
                e.is_empty()
            })
            .count();
        if matching != 1 {
            errors.push(format!("{path}: {value} matches {matching} of oneOf"));
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_i64)
        && value.as_i64().is_some_and(|v| v < min)
    {
        errors.push(format!("{path}: {value} is below {min}"));
    }
    if let Some(object) = value.as_object() {
        for field in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !object.contains_key(field) {
                errors.push(format!("{path}: missing {field}"));
            }
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (field, sub) in properties {
                if let Some(v) = object.get(field) {
                    validate(root, sub, v, &format!("{path}.{field}"), errors);
                }
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            validate(root, items, v, &format!("{path}[{i}]"), errors);
        }
    }
}

/// Every way `report` breaks docs/report.schema.json, as `path: what`.
pub fn report_schema_errors(report: &Value) -> Vec<String> {
    let schema = schema();
    let mut errors = Vec::new();
    validate(&schema, &schema, report, "$", &mut errors);
    errors
}
