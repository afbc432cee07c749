//! `DynamicResourcesArgs` (kube-scheduler v1.37): how long Filter may search one node
//! for devices, and how long PreBind may wait for device binding conditions.

use std::time::Duration;

use kubesched_framework::FeatureGates;
use kubesched_framework::duration;
use kubesched_framework::registry::PluginArgs;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Upstream's default `filterTimeout` (with DRASchedulerFilterTimeout on, as since v1.34).
pub const DEFAULT_FILTER_TIMEOUT: Duration = Duration::from_secs(10);

/// Upstream's default `bindingTimeout` (with DRADeviceBindingConditions and
/// DRAResourceClaimDeviceStatus on, as in v1.37).
pub const DEFAULT_BINDING_TIMEOUT: Duration = Duration::from_secs(600);

/// A `metav1.Duration` as decoded before validation: it may be negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgDuration {
    /// Written with a leading `-`.
    pub negative: bool,
    /// Its size.
    pub magnitude: Duration,
}

impl ArgDuration {
    /// A non-negative duration.
    pub const fn of(magnitude: Duration) -> Self {
        Self {
            negative: false,
            magnitude,
        }
    }

    fn is_negative(&self) -> bool {
        self.negative && !self.magnitude.is_zero()
    }
}

impl std::fmt::Display for ArgDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.is_negative() { "-" } else { "" };
        write!(f, "{sign}{}", duration::format(self.magnitude))
    }
}

impl Serialize for ArgDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ArgDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let (negative, magnitude) =
            duration::parse_signed(&text).map_err(serde::de::Error::custom)?;
        Ok(Self {
            negative,
            magnitude,
        })
    }
}

/// Arguments of the DynamicResources plugin (`pluginConfig[].args`). Decoding fills in
/// each timeout's default only while its gate is on (`filterTimeout: 10s` with
/// DRASchedulerFilterTimeout, `bindingTimeout: 10m0s` with DRADeviceBindingConditions and
/// DRAResourceClaimDeviceStatus), as upstream's defaulting does, so v1.37's `/configz`
/// shows both and an emulated release with a gate off shows neither; a field set while its
/// gate is off is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DynamicResourcesArgs {
    /// The longest one Filter call may search a node for devices; `0s` searches without
    /// limit. A search that runs out of time fails the attempt with an error (the pod
    /// backs off and retries), as v1.36 made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_timeout: Option<ArgDuration>,
    /// The longest PreBind waits for the binding conditions of allocated devices (at
    /// least one second; ten minutes when left out), and how long after its allocation
    /// a claim whose conditions are not all true counts as timed out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding_timeout: Option<ArgDuration>,
}

impl PluginArgs for DynamicResourcesArgs {
    const KIND: &'static str = "DynamicResourcesArgs";

    fn default_with_gates(&mut self, gates: &FeatureGates) {
        let gates = ArgGates::of(gates);
        if gates.filter_timeout && self.filter_timeout.is_none() {
            self.filter_timeout = Some(ArgDuration::of(DEFAULT_FILTER_TIMEOUT));
        }
        if gates.binding_conditions && self.binding_timeout.is_none() {
            self.binding_timeout = Some(ArgDuration::of(DEFAULT_BINDING_TIMEOUT));
        }
    }

    fn validate(&self, gates: &FeatureGates) -> Result<(), String> {
        self.filter_limit(ArgGates::of(gates)).map(|_| ())
    }
}

/// The gates the args depend on.
#[derive(Debug, Clone, Copy)]
pub struct ArgGates {
    /// DRASchedulerFilterTimeout.
    pub filter_timeout: bool,
    /// DRADeviceBindingConditions and DRAResourceClaimDeviceStatus, both on.
    pub binding_conditions: bool,
}

impl ArgGates {
    /// The gates' states in `gates`.
    pub fn of(gates: &FeatureGates) -> Self {
        let on = |name: &str| gates.enabled_by_name(name).unwrap_or(false);
        Self {
            filter_timeout: on("DRASchedulerFilterTimeout"),
            binding_conditions: on("DRADeviceBindingConditions")
                && on("DRAResourceClaimDeviceStatus"),
        }
    }
}

impl DynamicResourcesArgs {
    /// The binding timeout to apply (validated by [`Self::filter_limit`]).
    pub fn binding_limit(&self) -> Duration {
        self.binding_timeout
            .map_or(DEFAULT_BINDING_TIMEOUT, |t| t.magnitude)
    }

    /// Upstream's `ValidateDynamicResourcesArgs`: a field whose feature is off is refused
    /// (unlike the REST API), `filterTimeout` may not be negative and `bindingTimeout`
    /// must be at least a second. Returns the filter timeout to apply (None: no limit).
    pub fn filter_limit(&self, gates: ArgGates) -> Result<Option<Duration>, String> {
        let mut errs = Vec::new();
        let mut limit = None;
        if gates.filter_timeout {
            match self.filter_timeout {
                Some(t) if t.is_negative() => errs.push(format!(
                    "filterTimeout: Invalid value: \"{t}\": must be zero or positive"
                )),
                Some(t) if t.magnitude.is_zero() => {}
                Some(t) => limit = Some(t.magnitude),
                None => limit = Some(DEFAULT_FILTER_TIMEOUT),
            }
        } else if self.filter_timeout.is_some() {
            errs.push(
                "filterTimeout: Forbidden: DRASchedulingFilterTimeout feature gate is disabled"
                    .into(),
            );
        }
        if gates.binding_conditions {
            if let Some(t) = self.binding_timeout
                && (t.is_negative() || t.magnitude < Duration::from_secs(1))
            {
                errs.push(format!(
                    "bindingTimeout: Invalid value: \"{t}\": must be at least 1 second"
                ));
            }
        } else if self.binding_timeout.is_some() {
            errs.push("bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled".into());
        }
        match errs.len() {
            0 => Ok(limit),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }
}
