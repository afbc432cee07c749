//! Feature gates: the scheduler-relevant gates of kube-scheduler v1.34 with upstream's
//! names, stages and defaults, set with `--feature-gates` (`Name=true,Other=false`).
//!
//! Unknown names are refused, as upstream refuses them; a gate locked to its default (GA
//! and locked) refuses another value; `AllAlpha` / `AllBeta` set every alpha / beta gate.
//! Plugins read the gates through [`Handle::features`](crate::Handle::features). Only the
//! gates kubesched can change its behaviour for take effect when set; setting any other
//! one away from its default draws a warning from [`FeatureGates::without_effect`].

use std::collections::BTreeMap;
use std::fmt;

/// The maturity of a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Stage {
    /// Off by default, may change or go away.
    Alpha,
    /// Usually on by default.
    Beta,
    /// Generally available; the gate goes away in a later release.
    #[serde(rename = "GA")]
    Ga,
    /// Being removed.
    Deprecated,
}

impl Stage {
    /// Upstream's spelling (`ALPHA`, `BETA`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Alpha => "ALPHA",
            Self::Beta => "BETA",
            Self::Ga => "GA",
            Self::Deprecated => "DEPRECATED",
        }
    }
}

/// A gate kubesched knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSpec {
    /// Upstream's name.
    pub name: &'static str,
    /// The value in v1.34 when not set.
    pub default: bool,
    /// The stage in v1.34.
    pub stage: Stage,
    /// GA and locked to its default: another value is refused.
    pub locked: bool,
    /// Whether kubesched changes its behaviour when the gate is set away from its default.
    pub honoured: bool,
}

/// The gates kubesched reads or accepts, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// Preemption deletes its victims outside the scheduling cycle; the preemptor waits at
    /// PreEnqueue until the deletions are sent.
    SchedulerAsyncPreemption,
    /// When activeQ is empty, pods are popped from backoffQ (ordered in one-second windows).
    SchedulerPopFromBackoffQ,
    /// Queueing hints decide which events requeue a pod (GA, always on).
    SchedulerQueueingHints,
    /// VolumeBinding scores nodes by the storage its volumes would use there
    /// (`VolumeBindingArgs.shape`).
    StorageCapacityScoring,
}

impl Feature {
    /// Upstream's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SchedulerAsyncPreemption => "SchedulerAsyncPreemption",
            Self::SchedulerPopFromBackoffQ => "SchedulerPopFromBackoffQ",
            Self::SchedulerQueueingHints => "SchedulerQueueingHints",
            Self::StorageCapacityScoring => "StorageCapacityScoring",
        }
    }
}

const fn gate(name: &'static str, default: bool, stage: Stage) -> FeatureSpec {
    FeatureSpec {
        name,
        default,
        stage,
        locked: false,
        honoured: false,
    }
}

const fn locked(name: &'static str) -> FeatureSpec {
    FeatureSpec {
        name,
        default: true,
        stage: Stage::Ga,
        locked: true,
        honoured: false,
    }
}

const fn honoured(spec: FeatureSpec) -> FeatureSpec {
    FeatureSpec {
        honoured: true,
        ..spec
    }
}

/// kube-scheduler v1.34's gates that change scheduling (pkg/features), sorted by name.
pub const KNOWN_FEATURES: &[FeatureSpec] = &[
    locked("CSIMigrationPortworx"),
    gate("ClearingNominatedNodeNameAfterBinding", false, Stage::Alpha),
    gate("DRAAdminAccess", true, Stage::Beta),
    gate("DRAConsumableCapacity", false, Stage::Alpha),
    gate("DRADeviceBindingConditions", false, Stage::Alpha),
    gate("DRADeviceTaints", false, Stage::Alpha),
    gate("DRAExtendedResource", false, Stage::Alpha),
    gate("DRAPartitionableDevices", false, Stage::Alpha),
    gate("DRAPrioritizedList", true, Stage::Beta),
    gate("DRAResourceClaimDeviceStatus", true, Stage::Beta),
    gate("DRASchedulerFilterTimeout", true, Stage::Beta),
    gate("DynamicResourceAllocation", true, Stage::Ga),
    gate("InPlacePodVerticalScaling", true, Stage::Beta),
    locked("MatchLabelKeysInPodAffinity"),
    gate("MatchLabelKeysInPodTopologySpread", true, Stage::Beta),
    gate(
        "MatchLabelKeysInPodTopologySpreadSelectorMerge",
        true,
        Stage::Beta,
    ),
    locked("NodeInclusionPolicyInPodTopologySpread"),
    gate("NominatedNodeNameForExpectation", false, Stage::Alpha),
    gate("PodLevelResources", true, Stage::Beta),
    gate("SchedulerAsyncAPICalls", false, Stage::Beta),
    honoured(gate("SchedulerAsyncPreemption", true, Stage::Beta)),
    honoured(gate("SchedulerPopFromBackoffQ", true, Stage::Beta)),
    locked("SchedulerQueueingHints"),
    locked("SidecarContainers"),
    honoured(gate("StorageCapacityScoring", false, Stage::Alpha)),
    gate("VolumeAttributesClass", true, Stage::Ga),
];

/// What `--feature-gates` got wrong. The message names the gate and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// Not a `Name=bool` pair.
    #[error("--feature-gates: {0:?} is not of the form Name=true|false")]
    Malformed(String),
    /// A name kubesched does not know.
    #[error("--feature-gates: unrecognized feature gate: {0}")]
    Unknown(String),
    /// A value that is not a boolean.
    #[error("--feature-gates: invalid value of {name}={value}, err: must be true or false")]
    NotBool {
        /// The gate.
        name: String,
        /// What was given.
        value: String,
    },
    /// A locked gate set away from its default.
    #[error(
        "--feature-gates: cannot set feature gate {name} to {value}, feature is locked to {locked}"
    )]
    Locked {
        /// The gate.
        name: String,
        /// What was asked.
        value: bool,
        /// What it is locked to.
        locked: bool,
    },
}

/// The feature gates in effect: v1.34's defaults with what `--feature-gates` set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeatureGates {
    /// Gates set explicitly, by name.
    set: BTreeMap<&'static str, bool>,
}

fn spec_of(name: &str) -> Option<&'static FeatureSpec> {
    KNOWN_FEATURES.iter().find(|f| f.name == name)
}

impl FeatureGates {
    /// v1.34's defaults.
    pub fn defaults() -> Self {
        Self::default()
    }

    /// Parses one or more `--feature-gates` values (`A=true,B=false`; later ones win, as
    /// when the flag is repeated). `AllAlpha` and `AllBeta` apply first, then named gates.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<Self, FeatureGateError> {
        let mut all: Vec<(Stage, bool)> = Vec::new();
        let mut named: Vec<(&'static FeatureSpec, bool)> = Vec::new();
        for value in values {
            for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let Some((name, v)) = pair.split_once('=') else {
                    return Err(FeatureGateError::Malformed(pair.to_string()));
                };
                let (name, v) = (name.trim(), v.trim());
                let enabled = match v.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(FeatureGateError::NotBool {
                            name: name.to_string(),
                            value: v.to_string(),
                        });
                    }
                };
                match name {
                    "AllAlpha" => all.push((Stage::Alpha, enabled)),
                    "AllBeta" => all.push((Stage::Beta, enabled)),
                    _ => {
                        let spec = spec_of(name)
                            .ok_or_else(|| FeatureGateError::Unknown(name.to_string()))?;
                        if spec.locked && enabled != spec.default {
                            return Err(FeatureGateError::Locked {
                                name: name.to_string(),
                                value: enabled,
                                locked: spec.default,
                            });
                        }
                        named.push((spec, enabled));
                    }
                }
            }
        }
        let mut gates = Self::default();
        for (stage, enabled) in all {
            for spec in KNOWN_FEATURES
                .iter()
                .filter(|f| f.stage == stage && !f.locked)
            {
                gates.set.insert(spec.name, enabled);
            }
        }
        for (spec, enabled) in named {
            gates.set.insert(spec.name, enabled);
        }
        Ok(gates)
    }

    /// Whether the gate is on.
    pub fn enabled(&self, feature: Feature) -> bool {
        self.enabled_by_name(feature.name()).unwrap_or(false)
    }

    /// Whether the named gate is on (None for a name kubesched does not know).
    pub fn enabled_by_name(&self, name: &str) -> Option<bool> {
        let spec = spec_of(name)?;
        Some(self.set.get(spec.name).copied().unwrap_or(spec.default))
    }

    /// Sets a gate (for tests and embedders; the same rules as the flag).
    pub fn with(mut self, feature: Feature, enabled: bool) -> Result<Self, FeatureGateError> {
        let spec = spec_of(feature.name())
            .ok_or_else(|| FeatureGateError::Unknown(feature.name().to_string()))?;
        if spec.locked && enabled != spec.default {
            return Err(FeatureGateError::Locked {
                name: spec.name.to_string(),
                value: enabled,
                locked: spec.default,
            });
        }
        self.set.insert(spec.name, enabled);
        Ok(self)
    }

    /// Every known gate with its value in effect, sorted by name (for `/configz` and
    /// `kubesched config defaults`).
    pub fn effective(&self) -> BTreeMap<&'static str, bool> {
        KNOWN_FEATURES
            .iter()
            .map(|f| (f.name, self.set.get(f.name).copied().unwrap_or(f.default)))
            .collect()
    }

    /// Gates set away from their default that kubesched does not act on, sorted: the
    /// binary warns about each (the setting is accepted, as upstream accepts it, but
    /// scheduling does not change).
    pub fn without_effect(&self) -> Vec<&'static str> {
        KNOWN_FEATURES
            .iter()
            .filter(|f| !f.honoured && self.set.get(f.name).is_some_and(|v| *v != f.default))
            .map(|f| f.name)
            .collect()
    }

    /// Gates set explicitly that are GA or deprecated: upstream warns that they will go.
    pub fn set_but_graduated(&self) -> Vec<&'static str> {
        KNOWN_FEATURES
            .iter()
            .filter(|f| {
                matches!(f.stage, Stage::Ga | Stage::Deprecated) && self.set.contains_key(f.name)
            })
            .map(|f| f.name)
            .collect()
    }
}

impl fmt::Display for FeatureGates {
    /// The explicitly set gates as `--feature-gates` takes them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = self.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&pairs.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_34_defaults() {
        let g = FeatureGates::defaults();
        assert!(g.enabled(Feature::SchedulerAsyncPreemption));
        assert!(g.enabled(Feature::SchedulerPopFromBackoffQ));
        assert!(g.enabled(Feature::SchedulerQueueingHints));
        assert_eq!(g.enabled_by_name("SchedulerAsyncAPICalls"), Some(false));
        assert_eq!(g.enabled_by_name("DRAPrioritizedList"), Some(true));
        assert_eq!(
            g.enabled_by_name("NominatedNodeNameForExpectation"),
            Some(false)
        );
        assert_eq!(g.enabled_by_name("NoSuchGate"), None);
        let names: Vec<&str> = KNOWN_FEATURES.iter().map(|f| f.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "the table is sorted by name");
        assert!(g.without_effect().is_empty());
    }

    #[test]
    fn parses_the_flag_as_upstream() {
        let g =
            FeatureGates::parse(["SchedulerAsyncPreemption=false, SchedulerPopFromBackoffQ=FALSE"])
                .expect("valid");
        assert!(!g.enabled(Feature::SchedulerAsyncPreemption));
        assert!(!g.enabled(Feature::SchedulerPopFromBackoffQ));
        assert_eq!(
            g.to_string(),
            "SchedulerAsyncPreemption=false,SchedulerPopFromBackoffQ=false"
        );
        // A repeated flag: the later value wins.
        let g = FeatureGates::parse([
            "SchedulerAsyncPreemption=false",
            "SchedulerAsyncPreemption=true",
        ])
        .expect("valid");
        assert!(g.enabled(Feature::SchedulerAsyncPreemption));
        // AllBeta applies first; a named gate overrides it.
        let g =
            FeatureGates::parse(["SchedulerPopFromBackoffQ=true,AllBeta=false"]).expect("valid");
        assert!(g.enabled(Feature::SchedulerPopFromBackoffQ));
        assert!(!g.enabled(Feature::SchedulerAsyncPreemption));
        assert_eq!(g.enabled_by_name("DRAPrioritizedList"), Some(false));
        assert!(
            g.enabled(Feature::SchedulerQueueingHints),
            "locked gates stay"
        );
        assert_eq!(
            g.without_effect(),
            vec![
                "DRAAdminAccess",
                "DRAPrioritizedList",
                "DRAResourceClaimDeviceStatus",
                "DRASchedulerFilterTimeout",
                "InPlacePodVerticalScaling",
                "MatchLabelKeysInPodTopologySpread",
                "MatchLabelKeysInPodTopologySpreadSelectorMerge",
                "PodLevelResources",
            ]
        );
    }

    #[test]
    fn refuses_what_upstream_refuses() {
        let cases = [
            (
                "Nope=true",
                "--feature-gates: unrecognized feature gate: Nope",
            ),
            (
                "SchedulerAsyncPreemption",
                "--feature-gates: \"SchedulerAsyncPreemption\" is not of the form Name=true|false",
            ),
            (
                "SchedulerAsyncPreemption=yes",
                "--feature-gates: invalid value of SchedulerAsyncPreemption=yes, err: must be true or false",
            ),
            (
                "SchedulerQueueingHints=false",
                "--feature-gates: cannot set feature gate SchedulerQueueingHints to false, feature is locked to true",
            ),
        ];
        for (flag, want) in cases {
            let err = FeatureGates::parse([flag]).expect_err(flag);
            assert_eq!(err.to_string(), want);
        }
        // Setting a locked gate to its own value is fine; so is GA left unlocked.
        let g =
            FeatureGates::parse(["SchedulerQueueingHints=true,DynamicResourceAllocation=false"])
                .expect("valid");
        assert_eq!(
            g.set_but_graduated(),
            vec!["DynamicResourceAllocation", "SchedulerQueueingHints"]
        );
        assert_eq!(g.without_effect(), vec!["DynamicResourceAllocation"]);
    }
}
