//! `VolumeBindingArgs`: how long PreBind waits for volumes to be bound, and the scoring
//! shape of the StorageCapacityScoring feature.

use kubesched_framework::registry::PluginArgs;
use serde::{Deserialize, Serialize};

/// Default `bindTimeoutSeconds`.
pub const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;

/// One point of the utilization-to-score function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UtilizationShapePoint {
    /// Utilization (x axis), 0..=100.
    pub utilization: i32,
    /// Score (y axis), 0..=10.
    pub score: i32,
}

/// Arguments of the VolumeBinding plugin (`pluginConfig[].args`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct VolumeBindingArgs {
    /// How long PreBind waits for every claim of the pod to be bound (>= 0, default 600).
    pub bind_timeout_seconds: i64,
    /// The scoring function of StorageCapacityScoring. That feature gate is alpha and off in
    /// v1.34, so, as upstream with its default gates, any shape is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<UtilizationShapePoint>>,
}

impl Default for VolumeBindingArgs {
    fn default() -> Self {
        Self {
            bind_timeout_seconds: DEFAULT_BIND_TIMEOUT_SECONDS,
            shape: None,
        }
    }
}

/// Go's `%#v` of a shape, as upstream's field errors print the invalid value.
fn go_shape(shape: &[UtilizationShapePoint]) -> String {
    let points: Vec<String> = shape
        .iter()
        .map(|p| {
            format!(
                "config.UtilizationShapePoint{{Utilization:{}, Score:{}}}",
                p.utilization, p.score
            )
        })
        .collect();
    format!("[]config.UtilizationShapePoint{{{}}}", points.join(", "))
}

impl PluginArgs for VolumeBindingArgs {
    const KIND: &'static str = "VolumeBindingArgs";

    fn validate(&self) -> Result<(), String> {
        let mut errs = Vec::new();
        if self.bind_timeout_seconds < 0 {
            errs.push(format!(
                "bindTimeoutSeconds: Invalid value: {}: invalid BindTimeoutSeconds, should not be a negative value",
                self.bind_timeout_seconds
            ));
        }
        if let Some(shape) = &self.shape {
            errs.push(format!(
                "shape: Invalid value: {}: unsupported when StorageCapacityScoring feature is disabled",
                go_shape(shape)
            ));
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }
}
