//! `VolumeBindingArgs`: how long PreBind waits for volumes to be bound, and the scoring
//! shape of the StorageCapacityScoring feature.

use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{Feature, FeatureGates};
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
    /// The scoring function of StorageCapacityScoring: score (0..=10) by how much of the
    /// storage the pod's volumes would use on a node (0..=100 %), linear between points.
    /// With the gate off (the default through v1.36) a shape is refused; with it on an
    /// absent or empty shape is decoded as [`default_shape`] (and shown so by `/configz`).
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

/// Upstream's highest score a shape point may give (`MaxCustomPriorityScore`).
pub const MAX_SHAPE_SCORE: i32 = 10;

/// The shape upstream defaults to when StorageCapacityScoring is on: the emptier the
/// storage, the higher the score.
pub fn default_shape() -> Vec<UtilizationShapePoint> {
    vec![
        UtilizationShapePoint {
            utilization: 0,
            score: MAX_SHAPE_SCORE,
        },
        UtilizationShapePoint {
            utilization: 100,
            score: 0,
        },
    ]
}

/// Upstream's `validateFunctionShape`: at least one point, utilizations increasing, each
/// value in range.
fn validate_shape(shape: &[UtilizationShapePoint], errs: &mut Vec<String>) {
    if shape.is_empty() {
        errs.push("shape: Required value: at least one point must be specified".into());
        return;
    }
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        errs.push(format!(
            "shape[{i}].utilization: Invalid value: {}: utilization values must be sorted in increasing order",
            shape[i].utilization
        ));
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            errs.push(format!(
                "shape[{i}].utilization: Invalid value: {}: not in valid range [0, 100]",
                p.utilization
            ));
        }
        if !(0..=MAX_SHAPE_SCORE).contains(&p.score) {
            errs.push(format!(
                "shape[{i}].score: Invalid value: {}: not in valid range [0, {MAX_SHAPE_SCORE}]",
                p.score
            ));
        }
    }
}

fn joined(mut errs: Vec<String>) -> Result<(), String> {
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

impl VolumeBindingArgs {
    /// The checks that depend on StorageCapacityScoring: with the gate off a shape is
    /// refused with upstream's message; with it on the shape must be valid. Returns the
    /// shape to score with (the default when none is set), None with the gate off.
    pub fn scoring_shape(
        &self,
        storage_capacity_scoring: bool,
    ) -> Result<Option<Vec<UtilizationShapePoint>>, String> {
        let mut errs = Vec::new();
        let shape = self.checked_shape(storage_capacity_scoring, &mut errs);
        joined(errs).map(|()| shape)
    }

    /// The shape to score with (see [`Self::scoring_shape`]), its problems pushed to `errs`.
    fn checked_shape(
        &self,
        storage_capacity_scoring: bool,
        errs: &mut Vec<String>,
    ) -> Option<Vec<UtilizationShapePoint>> {
        if !storage_capacity_scoring {
            if let Some(shape) = &self.shape {
                errs.push(format!(
                    "shape: Invalid value: {}: unsupported when StorageCapacityScoring feature is disabled",
                    go_shape(shape)
                ));
            }
            return None;
        }
        // Upstream defaults an empty shape as an absent one.
        let shape = match &self.shape {
            Some(s) if !s.is_empty() => s.clone(),
            _ => default_shape(),
        };
        validate_shape(&shape, errs);
        Some(shape)
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

    /// Upstream's `SetDefaults_VolumeBindingArgs`: with StorageCapacityScoring on, an
    /// absent or empty shape becomes the default one.
    fn default_with_gates(&mut self, gates: &FeatureGates) {
        if gates.enabled(Feature::StorageCapacityScoring)
            && self.shape.as_ref().is_none_or(|s| s.is_empty())
        {
            self.shape = Some(default_shape());
        }
    }

    /// Upstream's `ValidateVolumeBindingArgsWithOptions` under the gates in effect.
    fn validate(&self, gates: &FeatureGates) -> Result<(), String> {
        let mut errs = Vec::new();
        if self.bind_timeout_seconds < 0 {
            errs.push(format!(
                "bindTimeoutSeconds: Invalid value: {}: invalid BindTimeoutSeconds, should not be a negative value",
                self.bind_timeout_seconds
            ));
        }
        self.checked_shape(gates.enabled(Feature::StorageCapacityScoring), &mut errs);
        joined(errs)
    }
}
