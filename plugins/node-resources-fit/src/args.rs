//! `NodeResourcesFitArgs`: upstream's fields, v1 defaults and validation messages.

use std::fmt::Display;

use kubesched_framework::registry::PluginArgs;
use serde::{Deserialize, Deserializer, Serialize};

/// The highest score a RequestedToCapacityRatio shape point may give.
pub const MAX_CUSTOM_PRIORITY_SCORE: i32 = 10;
/// The highest utilization a shape point may name, in percent.
pub const MAX_UTILIZATION: i32 = 100;

/// A resource scored by a strategy, with its weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    /// The resource name, e.g. `cpu` or `example.com/gpu`.
    #[serde(default)]
    pub name: String,
    /// 1..=100; an absent or zero weight means 1 (upstream's default).
    #[serde(default = "one", deserialize_with = "weight_or_one")]
    pub weight: i64,
}

impl ResourceSpec {
    /// A resource with a weight.
    pub fn new(name: &str, weight: i64) -> Self {
        Self {
            name: name.to_string(),
            weight,
        }
    }
}

fn one() -> i64 {
    1
}

fn weight_or_one<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Ok(match Option::<i64>::deserialize(d)? {
        None | Some(0) => 1,
        Some(w) => w,
    })
}

/// The resources scored when none are configured: cpu and memory, weight 1 each.
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

fn resources_or_default<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ResourceSpec>, D::Error> {
    let list = Option::<Vec<ResourceSpec>>::deserialize(d)?.unwrap_or_default();
    Ok(if list.is_empty() {
        default_resources()
    } else {
        list
    })
}

fn null_as_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// How feasible nodes are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum ScoringStrategyType {
    /// Favour nodes with the most room left (spreading).
    #[default]
    LeastAllocated,
    /// Favour nodes with the least room left (bin packing).
    MostAllocated,
    /// Score utilization through a user-given piecewise-linear shape.
    RequestedToCapacityRatio,
}

impl ScoringStrategyType {
    const ALL: [(&'static str, ScoringStrategyType); 3] = [
        ("LeastAllocated", Self::LeastAllocated),
        ("MostAllocated", Self::MostAllocated),
        ("RequestedToCapacityRatio", Self::RequestedToCapacityRatio),
    ];

    /// The name, as in config files.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::LeastAllocated => "LeastAllocated",
            Self::MostAllocated => "MostAllocated",
            Self::RequestedToCapacityRatio => "RequestedToCapacityRatio",
        }
    }
}

impl<'de> Deserialize<'de> for ScoringStrategyType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                let supported: Vec<String> =
                    Self::ALL.iter().map(|(n, _)| format!("{n:?}")).collect();
                serde::de::Error::custom(format!(
                    "scoringStrategy.type: Unsupported value: {name:?}: supported values: {}",
                    supported.join(", ")
                ))
            })
    }
}

/// One point of the RequestedToCapacityRatio shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct UtilizationShapePoint {
    /// Utilization in percent, 0..=100.
    pub utilization: i32,
    /// Score at that utilization, 0..=10.
    pub score: i32,
}

/// Parameters of the RequestedToCapacityRatio strategy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RequestedToCapacityRatioParam {
    /// Points sorted by increasing utilization.
    pub shape: Vec<UtilizationShapePoint>,
}

/// The scoring strategy and the resources it weighs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoringStrategy {
    /// The strategy; required when `scoringStrategy` is given.
    #[serde(rename = "type")]
    pub kind: ScoringStrategyType,
    /// The resources scored; cpu and memory (weight 1) when empty.
    #[serde(
        default = "default_resources",
        deserialize_with = "resources_or_default"
    )]
    pub resources: Vec<ResourceSpec>,
    /// The shape, for RequestedToCapacityRatio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        Self {
            kind: ScoringStrategyType::LeastAllocated,
            resources: default_resources(),
            requested_to_capacity_ratio: None,
        }
    }
}

/// Arguments of NodeResourcesFit.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NodeResourcesFitArgs {
    /// Extended resources Filter does not check.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ignored_resources: Vec<String>,
    /// Extended resource groups (the part before `/`) Filter does not check.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ignored_resource_groups: Vec<String>,
    /// How Score ranks nodes.
    #[serde(deserialize_with = "null_as_default")]
    pub scoring_strategy: ScoringStrategy,
}

impl PluginArgs for NodeResourcesFitArgs {
    const KIND: &'static str = "NodeResourcesFitArgs";

    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
        let mut errs = Vec::new();
        for (i, res) in self.ignored_resources.iter().enumerate() {
            let field = format!("ignoredResources[{i}]");
            errs.extend(qualified_name_errors(res).map(|m| invalid(&field, &quoted(res), &m)));
        }
        for (i, group) in self.ignored_resource_groups.iter().enumerate() {
            let field = format!("ignoredResourceGroups[{i}]");
            if group.contains('/') {
                errs.push(invalid(
                    &field,
                    &quoted(group),
                    "resource group name can't contain '/'",
                ));
            }
            errs.extend(qualified_name_errors(group).map(|m| invalid(&field, &quoted(group), &m)));
        }
        let strategy = &self.scoring_strategy;
        for (i, r) in strategy.resources.iter().enumerate() {
            if r.weight <= 0 || r.weight > 100 {
                errs.push(invalid(
                    &format!("scoringStrategy.resources[{i}].weight"),
                    &r.weight,
                    &format!("resource weight of {} not in valid range (0, 100]", r.name),
                ));
            }
        }
        match &strategy.requested_to_capacity_ratio {
            Some(param) => errs.extend(shape_errors(
                &param.shape,
                "scoringStrategy.requestedToCapacityRatio.shape",
            )),
            // Upstream dereferences the missing shape and fails later; refuse it up front.
            None if strategy.kind == ScoringStrategyType::RequestedToCapacityRatio => {
                errs.push(format!(
                    "scoringStrategy.requestedToCapacityRatio: Required value: \
                     the {} strategy needs a shape",
                    strategy.kind.as_str()
                ));
            }
            None => {}
        }
        aggregate(errs)
    }
}

/// Joins field errors the way Kubernetes aggregates them.
pub(crate) fn aggregate(errs: Vec<String>) -> Result<(), String> {
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.concat()),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

fn invalid(field: &str, value: &dyn Display, detail: &str) -> String {
    format!("{field}: Invalid value: {value}: {detail}")
}

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

fn shape_errors(shape: &[UtilizationShapePoint], field: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if shape.is_empty() {
        errs.push(format!(
            "{field}: Required value: at least one point must be specified"
        ));
        return errs;
    }
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        errs.push(invalid(
            &format!("{field}[{i}].utilization"),
            &shape[i].utilization,
            "values must be sorted in increasing order",
        ));
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=MAX_UTILIZATION).contains(&p.utilization) {
            errs.push(invalid(
                &format!("{field}[{i}].utilization"),
                &p.utilization,
                &format!("not in valid range [0, {MAX_UTILIZATION}]"),
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&p.score) {
            errs.push(invalid(
                &format!("{field}[{i}].score"),
                &p.score,
                &format!("not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"),
            ));
        }
    }
    errs
}

const NAME_PART_FMT: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', \
     and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
     '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// Upstream's label-name (qualified name) rules: `[prefix/]name`, the prefix a DNS-1123
/// subdomain of at most 253 characters, the name at most 63 alphanumerics, `-`, `_`, `.`.
fn qualified_name_errors(value: &str) -> impl Iterator<Item = String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else if prefix.len() > 253 {
                errs.push("prefix part must be no more than 253 characters".to_string());
            } else if !is_dns1123_subdomain(prefix) {
                errs.push(
                    "prefix part a lowercase RFC 1123 subdomain must consist of lower case \
                     alphanumeric characters, '-' or '.', and must start and end with an \
                     alphanumeric character (e.g. 'example.com', regex used for validation is \
                     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                        .to_string(),
                );
            }
            *name
        }
        _ => {
            errs.push(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', \
                 and must start and end with an alphanumeric character (e.g. 'MyName',  or \
                 'my.name',  or '123-abc', regex used for validation is \
                 '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain \
                 prefix and '/' (e.g. 'example.com/MyName')"
                    .to_string(),
            );
            return errs.into_iter();
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            errs.push("name part must be no more than 63 characters".to_string());
        }
        if !is_name_part(name) {
            errs.push(NAME_PART_FMT.to_string());
        }
    }
    errs.into_iter()
}

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        b.first().is_some_and(edge)
            && b.last().is_some_and(edge)
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::registry::ArgsCodec;
    use serde_json::json;

    fn decode(v: Option<serde_json::Value>) -> Result<NodeResourcesFitArgs, String> {
        let decoded = (ArgsCodec::of::<NodeResourcesFitArgs>().decode)(
            v.as_ref(),
            &kubesched_framework::FeatureGates::defaults(),
        )
        .map_err(|e| e.to_string())?;
        Ok(decoded
            .get::<NodeResourcesFitArgs>()
            .expect("typed args")
            .clone())
    }

    #[test]
    fn none_gives_upstream_defaults() {
        let args = decode(None).expect("decodes");
        assert_eq!(args, NodeResourcesFitArgs::default());
        assert_eq!(
            args.scoring_strategy.kind,
            ScoringStrategyType::LeastAllocated
        );
        assert_eq!(args.scoring_strategy.resources, default_resources());
        assert!(args.ignored_resources.is_empty());
    }

    #[test]
    fn defaulting_rules() {
        // A strategy without resources gets cpu and memory; a missing or zero weight is 1.
        let args = decode(Some(json!({
            "scoringStrategy": {"type": "MostAllocated"},
        })))
        .expect("decodes");
        assert_eq!(args.scoring_strategy.resources, default_resources());
        let args = decode(Some(json!({
            "scoringStrategy": {"type": "MostAllocated", "resources": []},
        })))
        .expect("decodes");
        assert_eq!(args.scoring_strategy.resources, default_resources());
        let args = decode(Some(json!({
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 0}, {"name": "example.com/gpu"}],
            },
        })))
        .expect("decodes");
        assert_eq!(
            args.scoring_strategy.resources,
            vec![
                ResourceSpec::new("cpu", 1),
                ResourceSpec::new("example.com/gpu", 1)
            ]
        );
        let args = decode(Some(
            json!({"scoringStrategy": null, "ignoredResources": null}),
        ))
        .expect("null means unset");
        assert_eq!(args, NodeResourcesFitArgs::default());
    }

    #[test]
    fn yaml_round_trip() {
        let yaml = "\
ignoredResources:
- example.com/foo
ignoredResourceGroups:
- example.org
scoringStrategy:
  type: RequestedToCapacityRatio
  resources:
  - name: cpu
    weight: 3
  - name: example.com/gpu
    weight: 5
  requestedToCapacityRatio:
    shape:
    - utilization: 0
      score: 0
    - utilization: 100
      score: 10
";
        let value: serde_json::Value = serde_saphyr::from_str(yaml).expect("yaml");
        let args = decode(Some(value.clone())).expect("decodes");
        assert_eq!(args.ignored_resources, vec!["example.com/foo"]);
        assert_eq!(
            args.scoring_strategy.kind,
            ScoringStrategyType::RequestedToCapacityRatio
        );
        let back = serde_json::to_value(&args).expect("encodes");
        assert_eq!(back, value);
        assert_eq!(decode(Some(back)).expect("decodes again"), args);
    }

    #[test]
    fn effective_args_of_the_defaults() {
        let decoded = (ArgsCodec::of::<NodeResourcesFitArgs>().decode)(
            None,
            &kubesched_framework::FeatureGates::defaults(),
        )
        .expect("decodes");
        insta::assert_yaml_snapshot!(decoded.effective);
    }

    #[test]
    fn refused_with_the_field_named() {
        let cases = [
            (
                json!({"scoringStrategy": {"type": "Balanced"}}),
                "scoringStrategy.type: Unsupported value: \"Balanced\": supported values: \
                 \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"",
            ),
            (
                json!({"scoringStrategy": {"resources": []}}),
                "missing field `type`",
            ),
            (
                json!({"scoringStrategy": {"type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 101}]}}),
                "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu \
                 not in valid range (0, 100]",
            ),
            (
                json!({"scoringStrategy": {"type": "MostAllocated",
                    "resources": [{"name": "memory", "weight": -1}]}}),
                "scoringStrategy.resources[0].weight: Invalid value: -1",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}),
                "scoringStrategy.requestedToCapacityRatio: Required value",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": []}}}),
                "scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one \
                 point must be specified",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [
                        {"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]}}}),
                "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: \
                 50: values must be sorted in increasing order",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [
                        {"utilization": 10, "score": 11}, {"utilization": 101, "score": 2}]}}}),
                "[scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: \
                 not in valid range [0, 10], scoringStrategy.requestedToCapacityRatio.shape[1]\
                 .utilization: Invalid value: 101: not in valid range [0, 100]]",
            ),
            (
                json!({"ignoredResources": ["-bad"]}),
                "ignoredResources[0]: Invalid value: \"-bad\": name part must consist of",
            ),
            (
                json!({"ignoredResources": ["Example.com/foo"]}),
                "ignoredResources[0]: Invalid value: \"Example.com/foo\": prefix part a \
                 lowercase RFC 1123 subdomain",
            ),
            (
                json!({"ignoredResourceGroups": ["example.com/foo"]}),
                "ignoredResourceGroups[0]: Invalid value: \"example.com/foo\": resource group \
                 name can't contain '/'",
            ),
            (
                json!({"ignoredResource": ["x"]}),
                "unknown field `ignoredResource`",
            ),
        ];
        for (value, want) in cases {
            let err = decode(Some(value.clone())).expect_err(&value.to_string());
            assert!(err.contains(want), "{value}: got {err}");
            assert!(err.contains("NodeResourcesFitArgs"), "{err}");
        }
    }

    #[test]
    fn qualified_names() {
        for ok in ["foo", "example.com/foo", "a.b-c/D_e.f", "x"] {
            assert_eq!(qualified_name_errors(ok).count(), 0, "{ok}");
        }
        for bad in ["", "/foo", "a/b/c", "foo-", "example.com/", &"a".repeat(64)] {
            assert!(qualified_name_errors(bad).count() > 0, "{bad:?}");
        }
    }
}
