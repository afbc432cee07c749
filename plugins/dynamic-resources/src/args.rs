//! `DynamicResourcesArgs` (kube-scheduler v1.37): how long Filter may search one node
//! for devices, and how long PreBind may wait for device binding conditions.

use std::time::Duration;

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

/// Arguments of the DynamicResources plugin (`pluginConfig[].args`). A field left out
/// stays `None` (so a field set while its gate is off can be refused, as upstream does);
/// the args are written with both timeouts' defaults filled in (`filterTimeout: 10s`,
/// `bindingTimeout: 10m0s`), as v1.37's `/configz` shows them. Upstream fills each in
/// only while its gate is on; kubesched decodes args before it knows the gates, so a
/// release emulated with a gate off still shows the default (read back, it is taken as
/// unset).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DynamicResourcesArgs {
    /// The longest one Filter call may search a node for devices; `0s` searches without
    /// limit. A search that runs out of time fails the attempt with an error (the pod
    /// backs off and retries), as v1.36 made it.
    pub filter_timeout: Option<ArgDuration>,
    /// The longest PreBind waits for the binding conditions of allocated devices (at
    /// least one second; ten minutes when left out), and how long after its allocation
    /// a claim whose conditions are not all true counts as timed out.
    pub binding_timeout: Option<ArgDuration>,
}

impl Serialize for DynamicResourcesArgs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        let filter = self
            .filter_timeout
            .unwrap_or(ArgDuration::of(DEFAULT_FILTER_TIMEOUT));
        map.serialize_entry("filterTimeout", &filter)?;
        let binding = self
            .binding_timeout
            .unwrap_or(ArgDuration::of(DEFAULT_BINDING_TIMEOUT));
        map.serialize_entry("bindingTimeout", &binding)?;
        map.end()
    }
}

impl PluginArgs for DynamicResourcesArgs {
    const KIND: &'static str = "DynamicResourcesArgs";

    /// The checks of values, made when a configuration is read (`config validate`
    /// included); whether a field may be set at all depends on gates, checked by
    /// [`DynamicResourcesArgs::filter_limit`] when the plugin is built.
    fn validate(&self) -> Result<(), String> {
        self.filter_limit(ArgGates {
            filter_timeout: true,
            binding_conditions: true,
        })
        .map(|_| ())
    }
}

/// The gates the args depend on, read when the plugin is built.
#[derive(Debug, Clone, Copy)]
pub struct ArgGates {
    /// DRASchedulerFilterTimeout.
    pub filter_timeout: bool,
    /// DRADeviceBindingConditions and DRAResourceClaimDeviceStatus, both on.
    pub binding_conditions: bool,
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
        } else if self
            .filter_timeout
            .is_some_and(|t| t != ArgDuration::of(DEFAULT_FILTER_TIMEOUT))
        {
            // The written args carry the default (as /configz shows it), and a
            // configuration may be decoded again from them: only another value was set.
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
        } else if self
            .binding_timeout
            .is_some_and(|t| t != ArgDuration::of(DEFAULT_BINDING_TIMEOUT))
        {
            // As filterTimeout: the default in written args was not set by anyone.
            errs.push("bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled".into());
        }
        match errs.len() {
            0 => Ok(limit),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }
}
