//! `PodTopologySpreadArgs`, with upstream's defaults and validation.

use std::collections::BTreeSet;

use kubesched_framework::model::k8s_openapi::api::core::v1::TopologySpreadConstraint as ApiConstraint;
use kubesched_framework::model::{Labels, TopologySpreadConstraint};
use kubesched_framework::registry::PluginArgs;
use serde::{Deserialize, Deserializer, Serialize};

/// Where the constraints of a pod that declares none come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum DefaultingType {
    /// Upstream's built-in constraints (hostname maxSkew 3, zone maxSkew 5, both soft).
    #[default]
    System,
    /// `defaultConstraints` of the args.
    List,
}

impl<'de> Deserialize<'de> for DefaultingType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            // An empty value is defaulted, as upstream's v1 defaulting does.
            "" | "System" => Ok(Self::System),
            "List" => Ok(Self::List),
            other => Err(serde::de::Error::custom(format!(
                "defaultingType: Unsupported value: {other:?}: supported values: \"List\", \"System\""
            ))),
        }
    }
}

/// Arguments of the PodTopologySpread plugin (`pluginConfig[].args`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PodTopologySpreadArgs {
    /// Constraints for pods that declare none, used when `defaultingType` is `List`. They
    /// must not carry a selector: it is deduced per pod from its Services and controller.
    pub default_constraints: Vec<ApiConstraint>,
    /// `System` (default) or `List`.
    pub defaulting_type: DefaultingType,
}

/// True for a Kubernetes qualified name: an optional DNS-subdomain prefix and `/`, then
/// up to 63 alphanumerics, `-`, `_` or `.`, starting and ending alphanumeric.
fn is_qualified_name(v: &str) -> bool {
    let (prefix, name) = match v.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, v),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && label.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && label.ends_with(|c: char| c.is_ascii_alphanumeric())
            })
    });
    name_ok && prefix_ok
}

impl PluginArgs for PodTopologySpreadArgs {
    const KIND: &'static str = "PodTopologySpreadArgs";

    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
        let mut errs: Vec<String> = Vec::new();
        if self.defaulting_type == DefaultingType::System && !self.default_constraints.is_empty() {
            errs.push(
                "defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty"
                    .into(),
            );
        }
        let mut seen = BTreeSet::new();
        for (i, c) in self.default_constraints.iter().enumerate() {
            let p = format!("defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                errs.push(format!(
                    "{p}.maxSkew: Invalid value: {}: not in valid range (0, inf)",
                    c.max_skew
                ));
            }
            if c.topology_key.is_empty() {
                errs.push(format!("{p}.topologyKey: Required value: can not be empty"));
            } else if !is_qualified_name(&c.topology_key) {
                errs.push(format!(
                    "{p}.topologyKey: Invalid value: {:?}: must be a qualified name",
                    c.topology_key
                ));
            }
            match c.when_unsatisfiable.as_str() {
                "" => errs.push(format!(
                    "{p}.whenUnsatisfiable: Required value: can not be empty"
                )),
                "DoNotSchedule" | "ScheduleAnyway" => {}
                other => errs.push(format!(
                    "{p}.whenUnsatisfiable: Unsupported value: {other:?}: supported values: \
                     \"DoNotSchedule\", \"ScheduleAnyway\""
                )),
            }
            if c.label_selector.is_some() {
                errs.push(format!(
                    "{p}.labelSelector: Forbidden: constraint must not define a selector, as \
                     they deduced for each pod"
                ));
            }
            if !seen.insert((c.topology_key.as_str(), c.when_unsatisfiable.as_str())) {
                errs.push(format!(
                    "{p}: Duplicate value: \"{{{}, {}}}\"",
                    c.topology_key, c.when_unsatisfiable
                ));
            }
            // What upstream leaves to the API types: the inclusion policies must parse.
            if c.max_skew > 0
                && let Err(e) = TopologySpreadConstraint::compile(c, &Labels::new(), &p)
                && !e.field.ends_with("whenUnsatisfiable")
            {
                errs.push(e.to_string());
            }
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_qualified_name;

    #[test]
    fn qualified_names() {
        for ok in ["zone", "topology.kubernetes.io/zone", "a-b_c.d", "x9"] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-zone",
            "zone-",
            "Bad.Prefix/zone",
            "/zone",
            "a/b/c",
            "sp ace",
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
