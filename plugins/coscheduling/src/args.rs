//! `CoschedulingArgs`, with scheduler-plugins' names, defaults and validation.

use serde::{Deserialize, Serialize};

/// The plugin's arguments (`pluginConfig[].args` of kind `CoschedulingArgs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CoschedulingArgs {
    /// How long placed pods wait at Permit for their siblings, when their PodGroup sets no
    /// `scheduleTimeoutSeconds`.
    pub permit_waiting_time_seconds: i64,
    /// How long a group PostFilter rejected whole is refused at PreFilter before it is
    /// tried again (0: one second, [`crate::REJECTED_GROUP_DEFAULT_BACKOFF`]; upstream has
    /// none then).
    pub pod_group_backoff_seconds: i64,
    /// When at most this percentage of `minMember` is still unplaced, a PostFilter failure
    /// does not reject the whole group: the remaining pods get to try again.
    pub pod_group_reject_percentage: i32,
}

/// `permitWaitingTimeSeconds` by default.
pub const DEFAULT_PERMIT_WAITING_TIME_SECONDS: i64 = 60;
/// `podGroupBackoffSeconds` by default.
pub const DEFAULT_POD_GROUP_BACKOFF_SECONDS: i64 = 0;
/// `podGroupRejectPercentage` by default.
pub const DEFAULT_POD_GROUP_REJECT_PERCENTAGE: i32 = 10;

impl Default for CoschedulingArgs {
    fn default() -> Self {
        Self {
            permit_waiting_time_seconds: DEFAULT_PERMIT_WAITING_TIME_SECONDS,
            pod_group_backoff_seconds: DEFAULT_POD_GROUP_BACKOFF_SECONDS,
            pod_group_reject_percentage: DEFAULT_POD_GROUP_REJECT_PERCENTAGE,
        }
    }
}

impl kubesched_framework::registry::PluginArgs for CoschedulingArgs {
    const KIND: &'static str = "CoschedulingArgs";

    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
        let mut errors = Vec::new();
        if self.permit_waiting_time_seconds < 0 {
            errors.push(format!(
                "permitWaitingTimeSeconds: Invalid value: {}: must be greater than 0",
                self.permit_waiting_time_seconds
            ));
        }
        if self.pod_group_backoff_seconds < 0 {
            errors.push(format!(
                "podGroupBackoffSeconds: Invalid value: {}: must be greater than 0",
                self.pod_group_backoff_seconds
            ));
        }
        if !(0..=100).contains(&self.pod_group_reject_percentage) {
            errors.push(format!(
                "podGroupRejectPercentage: Invalid value: {}: must be between 0 and 100",
                self.pod_group_reject_percentage
            ));
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::registry::PluginArgs;

    fn check(json: serde_json::Value, want: Result<CoschedulingArgs, &str>) {
        let args: CoschedulingArgs = serde_json::from_value(json).expect("decodes");
        match want {
            Ok(expected) => {
                assert_eq!(
                    args.validate(&kubesched_framework::FeatureGates::defaults()),
                    Ok(())
                );
                assert_eq!(args, expected);
            }
            Err(message) => assert_eq!(
                args.validate(&kubesched_framework::FeatureGates::defaults()),
                Err(message.to_string())
            ),
        }
    }

    #[test]
    fn defaults_and_validation() {
        check(serde_json::json!({}), Ok(CoschedulingArgs::default()));
        check(
            serde_json::json!({"permitWaitingTimeSeconds": 10, "podGroupBackoffSeconds": 5}),
            Ok(CoschedulingArgs {
                permit_waiting_time_seconds: 10,
                pod_group_backoff_seconds: 5,
                pod_group_reject_percentage: 10,
            }),
        );
        check(
            serde_json::json!({"permitWaitingTimeSeconds": -1}),
            Err("permitWaitingTimeSeconds: Invalid value: -1: must be greater than 0"),
        );
        check(
            serde_json::json!({"podGroupRejectPercentage": 101, "podGroupBackoffSeconds": -2}),
            Err(
                "[podGroupBackoffSeconds: Invalid value: -2: must be greater than 0, \
                 podGroupRejectPercentage: Invalid value: 101: must be between 0 and 100]",
            ),
        );
    }

    #[test]
    fn round_trips_with_defaults_filled_in() {
        let text = serde_json::to_value(CoschedulingArgs::default()).expect("encodes");
        assert_eq!(
            text,
            serde_json::json!({
                "permitWaitingTimeSeconds": 60,
                "podGroupBackoffSeconds": 0,
                "podGroupRejectPercentage": 10
            })
        );
    }
}
