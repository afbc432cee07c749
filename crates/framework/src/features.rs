//! Feature gates: the scheduler-relevant gates of kube-scheduler v1.34 to v1.37 with
//! upstream's names, stages and defaults per release, set with `--feature-gates`
//! (`Name=true,Other=false`) and `--emulated-version` (`1.34` … `1.37`, default `1.37`).
//!
//! Each gate carries its history as upstream's versioned specs do: the stage, default and
//! lock from the release it took them. The release in effect picks, per gate, the newest
//! entry not after it. A gate that does not exist yet at that release is refused when set
//! (upstream calls it pre-alpha); a gate removed by then is refused as unknown, as upstream
//! refuses it. A gate locked to its default (GA and locked) refuses another value;
//! `AllAlpha` / `AllBeta` set every alpha / beta gate. Plugins read the gates through
//! [`Handle::features`](crate::Handle::features). Only the gates kubesched can change its
//! behaviour for take effect when set; setting any other one away from its default draws a
//! warning from [`FeatureGates::without_effect`].

use std::collections::BTreeMap;
use std::fmt;

/// A Kubernetes release, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Always 1 for the releases kubesched knows.
    pub major: u8,
    /// The minor release.
    pub minor: u8,
}

impl Version {
    /// Kubernetes v1.34.
    pub const V1_34: Self = Self::new(1, 34);
    /// Kubernetes v1.35.
    pub const V1_35: Self = Self::new(1, 35);
    /// Kubernetes v1.36.
    pub const V1_36: Self = Self::new(1, 36);
    /// Kubernetes v1.37.
    pub const V1_37: Self = Self::new(1, 37);
    /// The release kubesched reproduces by default.
    pub const CURRENT: Self = Self::V1_37;
    /// The oldest release `--emulated-version` accepts: upstream emulates up to three
    /// minor releases back.
    pub const OLDEST_EMULATED: Self = Self::V1_34;

    /// `major.minor`.
    pub const fn new(major: u8, minor: u8) -> Self {
        Self { major, minor }
    }

    /// Reads `--emulated-version`: `1.36`, `v1.36`, `1.36.2` (the patch is ignored, as
    /// upstream ignores it) or `kube=1.36` (upstream's component-prefixed form). The
    /// release must lie between [`Version::OLDEST_EMULATED`] and [`Version::CURRENT`].
    pub fn parse_emulated(value: &str) -> Result<Self, FeatureGateError> {
        let bad = || FeatureGateError::EmulatedVersion(value.to_string());
        let mut v = value.trim();
        if let Some((component, rest)) = v.split_once('=') {
            if component.trim() != "kube" {
                return Err(FeatureGateError::EmulatedComponent(
                    component.trim().to_string(),
                ));
            }
            v = rest.trim();
        }
        let v = v.strip_prefix('v').unwrap_or(v);
        let mut parts = v.split('.');
        let major: u8 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let minor: u8 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        if let Some(patch) = parts.next()
            && patch.parse::<u32>().is_err()
        {
            return Err(bad());
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        let version = Self::new(major, minor);
        if version < Self::OLDEST_EMULATED || version > Self::CURRENT {
            return Err(FeatureGateError::EmulatedOutOfRange(version));
        }
        Ok(version)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Default for Version {
    fn default() -> Self {
        Self::CURRENT
    }
}

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

/// A gate as it stands at one release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSpec {
    /// Upstream's name.
    pub name: &'static str,
    /// The value when not set.
    pub default: bool,
    /// The stage.
    pub stage: Stage,
    /// GA and locked to its default: another value is refused.
    pub locked: bool,
    /// Whether kubesched changes its behaviour when the gate is set away from its default.
    pub honoured: bool,
}

/// One step of a gate's history: from `since` on, this default, stage and lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionedSpec {
    /// The first release with this spec.
    pub since: Version,
    /// The value when not set.
    pub default: bool,
    /// The stage.
    pub stage: Stage,
    /// Locked to its default.
    pub locked: bool,
}

/// A gate kubesched knows, with its history (upstream's `VersionedSpecs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureDef {
    /// Upstream's name.
    pub name: &'static str,
    /// Whether kubesched changes its behaviour for it.
    pub honoured: bool,
    /// The specs, oldest first.
    pub specs: &'static [VersionedSpec],
    /// The release that no longer has the gate (upstream removed it).
    pub removed_in: Option<Version>,
}

impl FeatureDef {
    /// The gate at a release: None before it came and from its removal on.
    pub fn at(&self, version: Version) -> Option<FeatureSpec> {
        if self.removed_in.is_some_and(|r| version >= r) {
            return None;
        }
        let spec = self.specs.iter().rev().find(|s| s.since <= version)?;
        Some(FeatureSpec {
            name: self.name,
            default: spec.default,
            stage: spec.stage,
            locked: spec.locked,
            honoured: self.honoured,
        })
    }

    /// Whether the gate was added after `version` (upstream's pre-alpha).
    fn not_yet_at(&self, version: Version) -> bool {
        self.specs.first().is_some_and(|s| s.since > version)
    }
}

/// The gates kubesched reads, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// The secure port serves `/flagz`: the command line's flags and values (KEP-4828;
    /// alpha 1.32, beta and on from v1.36).
    ComponentFlagz,
    /// The secure port serves `/statusz`: start time, uptime, versions and the debugging
    /// paths (KEP-4827; alpha 1.32, beta and on from v1.36).
    ComponentStatusz,
    /// Workload-aware scheduling (KEP-4671): `scheduling.k8s.io/v1beta1` PodGroups, the
    /// GangScheduling plugin in the default profile and the pod-group scheduling cycle
    /// (alpha 1.35, beta and off in v1.37).
    GenericWorkload,
    /// The NodeDeclaredFeatures plugin is in the default profile and keeps pods off nodes
    /// that do not declare the features the pod needs (KEP-5328; alpha 1.35, beta 1.36, GA
    /// and locked from v1.37).
    NodeDeclaredFeatures,
    /// The binding cycle writes the chosen node to `nominatedNodeName` before it waits at
    /// Permit or runs PreBind plugins that have work (KEP-5278; alpha 1.34, beta and on
    /// from v1.35), so autoscalers see where the pod is going.
    NominatedNodeNameForExpectation,
    /// Preemption deletes its victims outside the scheduling cycle; the preemptor waits at
    /// PreEnqueue until the deletions are sent.
    SchedulerAsyncPreemption,
    /// When activeQ is empty, pods are popped from backoffQ (ordered in one-second windows).
    SchedulerPopFromBackoffQ,
    /// Queueing hints decide which events requeue a pod (GA, always on).
    SchedulerQueueingHints,
    /// VolumeBinding scores nodes by the storage its volumes would use there
    /// (`VolumeBindingArgs.shape`); beta and on from v1.37.
    StorageCapacityScoring,
    /// Tolerations may use the numeric operators `Gt` and `Lt` against a taint's value
    /// (KEP-5471, alpha from v1.35).
    TaintTolerationComparisonOperators,
    /// The pod-group cycle tries a group in candidate placements (TopologyPlacement: one
    /// per domain of the PodGroup's `spec.schedulingConstraints.topology[0].key`) and keeps
    /// the best by PlacementScore (KEP-5732; alpha and off from v1.36; needs GenericWorkload).
    TopologyAwareWorkloadScheduling,
    /// NodeVolumeLimits keeps pods off nodes whose CSINode lacks a driver that asks for it
    /// (`CSIDriver.spec.preventPodSchedulingIfMissing`; KEP-5030, alpha 1.35, beta and on
    /// from v1.37).
    VolumeLimitScaling,
}

impl Feature {
    /// Upstream's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ComponentFlagz => "ComponentFlagz",
            Self::ComponentStatusz => "ComponentStatusz",
            Self::GenericWorkload => "GenericWorkload",
            Self::NodeDeclaredFeatures => "NodeDeclaredFeatures",
            Self::NominatedNodeNameForExpectation => "NominatedNodeNameForExpectation",
            Self::SchedulerAsyncPreemption => "SchedulerAsyncPreemption",
            Self::SchedulerPopFromBackoffQ => "SchedulerPopFromBackoffQ",
            Self::SchedulerQueueingHints => "SchedulerQueueingHints",
            Self::StorageCapacityScoring => "StorageCapacityScoring",
            Self::TaintTolerationComparisonOperators => "TaintTolerationComparisonOperators",
            Self::TopologyAwareWorkloadScheduling => "TopologyAwareWorkloadScheduling",
            Self::VolumeLimitScaling => "VolumeLimitScaling",
        }
    }
}

const fn at(minor: u8, default: bool, stage: Stage) -> VersionedSpec {
    VersionedSpec {
        since: Version::new(1, minor),
        default,
        stage,
        locked: false,
    }
}

/// GA, on, and locked from this release.
const fn ga_locked(minor: u8) -> VersionedSpec {
    VersionedSpec {
        since: Version::new(1, minor),
        default: true,
        stage: Stage::Ga,
        locked: true,
    }
}

const fn def(name: &'static str, specs: &'static [VersionedSpec]) -> FeatureDef {
    FeatureDef {
        name,
        honoured: false,
        specs,
        removed_in: None,
    }
}

const fn honoured(d: FeatureDef) -> FeatureDef {
    FeatureDef {
        honoured: true,
        ..d
    }
}

const fn removed(minor: u8, d: FeatureDef) -> FeatureDef {
    FeatureDef {
        removed_in: Some(Version::new(1, minor)),
        ..d
    }
}

use Stage::{Alpha, Beta, Ga};

/// kube-scheduler's gates that change scheduling, v1.34 to v1.37, sorted by name.
///
/// Sources: the scheduler's versioned feature specs of v1.37 (upstream moved the
/// scheduler's gates into their own table in v1.37) and `pkg/features/kube_features.go` of
/// v1.35 for the gates that live outside it; only the entries that matter from v1.34 on
/// are written. Removals follow upstream (GangScheduling and WorkloadAwarePreemption folded
/// into GenericWorkload in v1.37; SidecarContainers and CSIMigrationPortworx went in v1.36
/// as their GA entries announced).
pub const FEATURES: &[FeatureDef] = &[
    removed(36, def("CSIMigrationPortworx", &[ga_locked(33)])),
    def(
        "ClearingNominatedNodeNameAfterBinding",
        &[at(34, false, Alpha), at(35, true, Beta)],
    ),
    // The z-pages of component-base (k8s.io/component-base/zpages/features), served on
    // the secure port beside /configz.
    honoured(def(
        "ComponentFlagz",
        &[at(32, false, Alpha), at(36, true, Beta)],
    )),
    honoured(def(
        "ComponentStatusz",
        &[at(32, false, Alpha), at(36, true, Beta)],
    )),
    def("CompositePodGroup", &[at(37, false, Alpha)]),
    def("DRAAdminAccess", &[at(34, true, Beta), ga_locked(36)]),
    def(
        "DRAConsumableCapacity",
        &[at(34, false, Alpha), at(36, true, Beta)],
    ),
    def("DRADerivedAttributes", &[at(37, false, Alpha)]),
    def(
        "DRADeviceBindingConditions",
        &[at(34, false, Alpha), at(36, true, Beta)],
    ),
    def("DRADeviceCompatibilityGroups", &[at(37, false, Alpha)]),
    def(
        "DRADeviceTaintRules",
        &[at(35, false, Alpha), at(36, false, Beta), at(37, true, Ga)],
    ),
    def(
        "DRADeviceTaints",
        &[at(33, false, Alpha), at(36, true, Beta), at(37, true, Ga)],
    ),
    def(
        "DRAExtendedResource",
        &[at(34, false, Alpha), at(36, true, Beta), ga_locked(37)],
    ),
    // v1.37 has a second entry (on) that applies only with a minimum compatibility
    // version of 1.37; the default compatibility version is one release back, so off.
    def("DRAFractionalCapacityRange", &[at(37, false, Beta)]),
    def("DRAListTypeAttributes", &[at(36, false, Alpha)]),
    def("DRANodeAllocatableResources", &[at(36, false, Alpha)]),
    def("DRAOptionalNodeOperations", &[at(37, false, Alpha)]),
    def(
        "DRAPartitionableDevices",
        &[at(33, false, Alpha), at(36, true, Beta)],
    ),
    def(
        "DRAPrioritizedList",
        &[at(34, true, Beta), at(36, true, Ga), ga_locked(37)],
    ),
    def(
        "DRAResourceClaimDeviceStatus",
        &[at(33, true, Beta), ga_locked(37)],
    ),
    def("DRASchedulerFilterTimeout", &[at(34, true, Beta)]),
    def(
        "DRAWorkloadResourceClaims",
        &[at(36, false, Alpha), at(37, false, Beta)],
    ),
    def(
        "DynamicResourceAllocation",
        &[at(34, true, Ga), ga_locked(35)],
    ),
    removed(37, def("GangScheduling", &[at(35, false, Alpha)])),
    honoured(def(
        "GenericWorkload",
        &[at(35, false, Alpha), at(37, false, Beta)],
    )),
    def(
        "InPlacePodLevelResourcesVerticalScaling",
        &[at(35, false, Alpha), at(36, true, Beta)],
    ),
    def(
        "InPlacePodVerticalScaling",
        &[at(33, true, Beta), ga_locked(35)],
    ),
    def(
        "InPlacePodVerticalScalingSchedulerPreemption",
        &[at(37, false, Alpha)],
    ),
    def("InterPodAffinityHostnameFastPath", &[at(37, false, Alpha)]),
    def("MatchLabelKeysInPodAffinity", &[ga_locked(33)]),
    def("MatchLabelKeysInPodTopologySpread", &[at(27, true, Beta)]),
    def(
        "MatchLabelKeysInPodTopologySpreadSelectorMerge",
        &[at(34, true, Beta)],
    ),
    honoured(def(
        "NodeDeclaredFeatures",
        &[at(35, false, Alpha), at(36, true, Beta), ga_locked(37)],
    )),
    def("NodeInclusionPolicyInPodTopologySpread", &[ga_locked(33)]),
    honoured(def(
        "NominatedNodeNameForExpectation",
        &[at(34, false, Alpha), at(35, true, Beta)],
    )),
    def("OpportunisticBatching", &[at(35, true, Beta)]),
    def("PodGroupPreemptionPolicy", &[at(37, false, Alpha)]),
    def("PodLevelResources", &[at(34, true, Beta)]),
    def("SchedulerAsyncAPICalls", &[at(34, false, Beta)]),
    honoured(def("SchedulerAsyncPreemption", &[at(33, true, Beta)])),
    honoured(def("SchedulerPopFromBackoffQ", &[at(33, true, Beta)])),
    def("SchedulerPreQueueingHints", &[at(37, false, Alpha)]),
    def("SchedulerQueueingHints", &[ga_locked(34)]),
    removed(36, def("SidecarContainers", &[ga_locked(33)])),
    honoured(def(
        "StorageCapacityScoring",
        &[at(33, false, Alpha), at(37, true, Beta)],
    )),
    honoured(def(
        "TaintTolerationComparisonOperators",
        &[at(35, false, Alpha)],
    )),
    honoured(def(
        "TopologyAwareWorkloadScheduling",
        &[at(36, false, Alpha)],
    )),
    def("VolumeAttributesClass", &[at(34, true, Ga), ga_locked(36)]),
    honoured(def(
        "VolumeLimitScaling",
        &[at(35, false, Alpha), at(37, true, Beta)],
    )),
    removed(37, def("WorkloadAwarePreemption", &[at(36, false, Alpha)])),
];

/// The gates of a release, sorted by name (what `--feature-gates` takes at it).
pub fn known_features(version: Version) -> Vec<FeatureSpec> {
    FEATURES.iter().filter_map(|d| d.at(version)).collect()
}

/// What `--feature-gates` or `--emulated-version` got wrong. The message names the gate
/// and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// Not a `Name=bool` pair.
    #[error("--feature-gates: {0:?} is not of the form Name=true|false")]
    Malformed(String),
    /// A name kubesched does not know (or upstream removed by the release in effect).
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
    /// A gate that comes in a later release than the one emulated.
    #[error(
        "--feature-gates: cannot set feature gate {name} to {value}, feature is PreAlpha at emulated version {version}"
    )]
    PreAlpha {
        /// The gate.
        name: String,
        /// What was asked.
        value: bool,
        /// The release in effect.
        version: Version,
    },
    /// Not a release number.
    #[error("--emulated-version: invalid version {0:?}: want MAJOR.MINOR, e.g. 1.36")]
    EmulatedVersion(String),
    /// A component other than `kube`.
    #[error("--emulated-version: unknown component {0:?}: kube-scheduler emulates only \"kube\"")]
    EmulatedComponent(String),
    /// Outside what can be emulated.
    #[error(
        "--emulated-version: emulation version {0} is not between [{oldest}, {current}]",
        oldest = Version::OLDEST_EMULATED,
        current = Version::CURRENT
    )]
    EmulatedOutOfRange(Version),
}

/// The feature gates in effect: a release's defaults (v1.37 unless emulating an older
/// one) with what `--feature-gates` set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeatureGates {
    /// The release whose gates apply.
    version: Version,
    /// Gates set explicitly, by name.
    set: BTreeMap<&'static str, bool>,
}

fn def_of(name: &str) -> Option<&'static FeatureDef> {
    FEATURES.iter().find(|f| f.name == name)
}

impl FeatureGates {
    /// The defaults of the release kubesched reproduces ([`Version::CURRENT`]).
    pub fn defaults() -> Self {
        Self::default()
    }

    /// The defaults of an emulated release.
    pub fn defaults_at(version: Version) -> Self {
        Self {
            version,
            set: BTreeMap::new(),
        }
    }

    /// The release whose gates apply.
    pub fn version(&self) -> Version {
        self.version
    }

    fn spec(&self, name: &str) -> Result<FeatureSpec, FeatureGateError> {
        let def = def_of(name).ok_or_else(|| FeatureGateError::Unknown(name.to_string()))?;
        def.at(self.version)
            .ok_or_else(|| FeatureGateError::Unknown(name.to_string()))
    }

    fn check(&self, name: &str, enabled: bool) -> Result<FeatureSpec, FeatureGateError> {
        if let Some(def) = def_of(name)
            && def.not_yet_at(self.version)
        {
            return Err(FeatureGateError::PreAlpha {
                name: name.to_string(),
                value: enabled,
                version: self.version,
            });
        }
        let spec = self.spec(name)?;
        if spec.locked && enabled != spec.default {
            return Err(FeatureGateError::Locked {
                name: name.to_string(),
                value: enabled,
                locked: spec.default,
            });
        }
        Ok(spec)
    }

    /// Parses one or more `--feature-gates` values against the current release's gates.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<Self, FeatureGateError> {
        Self::parse_at(Version::CURRENT, values)
    }

    /// Parses one or more `--feature-gates` values (`A=true,B=false`; later ones win, as
    /// when the flag is repeated) against the gates of `version`. `AllAlpha` and `AllBeta`
    /// apply first, then named gates.
    pub fn parse_at<'a>(
        version: Version,
        values: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, FeatureGateError> {
        let mut gates = Self::defaults_at(version);
        let mut all: Vec<(Stage, bool)> = Vec::new();
        let mut named: Vec<(&'static str, bool)> = Vec::new();
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
                    _ => named.push((gates.check(name, enabled)?.name, enabled)),
                }
            }
        }
        for (stage, enabled) in all {
            for spec in known_features(version)
                .iter()
                .filter(|f| f.stage == stage && !f.locked)
            {
                gates.set.insert(spec.name, enabled);
            }
        }
        for (name, enabled) in named {
            gates.set.insert(name, enabled);
        }
        Ok(gates)
    }

    /// Whether the gate is on (off for a gate the release in effect does not have).
    pub fn enabled(&self, feature: Feature) -> bool {
        self.enabled_by_name(feature.name()).unwrap_or(false)
    }

    /// Whether the named gate is on (None for a name the release in effect does not have).
    pub fn enabled_by_name(&self, name: &str) -> Option<bool> {
        let spec = self.spec(name).ok()?;
        Some(self.set.get(spec.name).copied().unwrap_or(spec.default))
    }

    /// Sets a gate (for tests and embedders; the same rules as the flag).
    pub fn with(mut self, feature: Feature, enabled: bool) -> Result<Self, FeatureGateError> {
        let spec = self.check(feature.name(), enabled)?;
        self.set.insert(spec.name, enabled);
        Ok(self)
    }

    /// Whether the named gate was set (by the flag or [`Self::with`]), not left at its
    /// default.
    pub fn is_set(&self, name: &str) -> bool {
        self.spec(name)
            .is_ok_and(|spec| self.set.contains_key(spec.name))
    }

    /// Sets a gate by name (a workload file's `featureGates`), with the flag's rules: an
    /// unknown, not-yet-added or locked gate is refused.
    pub fn with_name(mut self, name: &str, enabled: bool) -> Result<Self, FeatureGateError> {
        let spec = self.check(name, enabled)?;
        self.set.insert(spec.name, enabled);
        Ok(self)
    }

    /// Every gate of the release in effect with its value, sorted by name (for `/configz`
    /// and `kubesched config defaults`).
    pub fn effective(&self) -> BTreeMap<&'static str, bool> {
        known_features(self.version)
            .iter()
            .map(|f| (f.name, self.set.get(f.name).copied().unwrap_or(f.default)))
            .collect()
    }

    /// Every gate of the release in effect with its stage and value, sorted by name.
    pub fn effective_specs(&self) -> Vec<(FeatureSpec, bool)> {
        known_features(self.version)
            .into_iter()
            .map(|f| {
                let on = self.set.get(f.name).copied().unwrap_or(f.default);
                (f, on)
            })
            .collect()
    }

    /// Gates set away from their default that kubesched does not act on, sorted: the
    /// binary warns about each (the setting is accepted, as upstream accepts it, but
    /// scheduling does not change).
    pub fn without_effect(&self) -> Vec<&'static str> {
        known_features(self.version)
            .iter()
            .filter(|f| !f.honoured && self.set.get(f.name).is_some_and(|v| *v != f.default))
            .map(|f| f.name)
            .collect()
    }

    /// Gates set explicitly that are GA or deprecated: upstream warns that they will go.
    pub fn set_but_graduated(&self) -> Vec<&'static str> {
        known_features(self.version)
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

    /// One row per gate: name, default, stage, locked.
    fn table(version: Version) -> Vec<(&'static str, bool, Stage, bool)> {
        known_features(version)
            .iter()
            .map(|f| (f.name, f.default, f.stage, f.locked))
            .collect()
    }

    #[test]
    fn v1_34_restores_the_v1_34_table() {
        // kubesched's table before the move to v1.37, row for row.
        let want = vec![
            ("CSIMigrationPortworx", true, Ga, true),
            ("ClearingNominatedNodeNameAfterBinding", false, Alpha, false),
            ("ComponentFlagz", false, Alpha, false),
            ("ComponentStatusz", false, Alpha, false),
            ("DRAAdminAccess", true, Beta, false),
            ("DRAConsumableCapacity", false, Alpha, false),
            ("DRADeviceBindingConditions", false, Alpha, false),
            ("DRADeviceTaints", false, Alpha, false),
            ("DRAExtendedResource", false, Alpha, false),
            ("DRAPartitionableDevices", false, Alpha, false),
            ("DRAPrioritizedList", true, Beta, false),
            ("DRAResourceClaimDeviceStatus", true, Beta, false),
            ("DRASchedulerFilterTimeout", true, Beta, false),
            ("DynamicResourceAllocation", true, Ga, false),
            ("InPlacePodVerticalScaling", true, Beta, false),
            ("MatchLabelKeysInPodAffinity", true, Ga, true),
            ("MatchLabelKeysInPodTopologySpread", true, Beta, false),
            (
                "MatchLabelKeysInPodTopologySpreadSelectorMerge",
                true,
                Beta,
                false,
            ),
            ("NodeInclusionPolicyInPodTopologySpread", true, Ga, true),
            ("NominatedNodeNameForExpectation", false, Alpha, false),
            ("PodLevelResources", true, Beta, false),
            ("SchedulerAsyncAPICalls", false, Beta, false),
            ("SchedulerAsyncPreemption", true, Beta, false),
            ("SchedulerPopFromBackoffQ", true, Beta, false),
            ("SchedulerQueueingHints", true, Ga, true),
            ("SidecarContainers", true, Ga, true),
            ("StorageCapacityScoring", false, Alpha, false),
            ("VolumeAttributesClass", true, Ga, false),
        ];
        assert_eq!(table(Version::V1_34), want);
        let g = FeatureGates::defaults_at(Version::V1_34);
        assert!(!g.enabled(Feature::StorageCapacityScoring));
        assert!(g.without_effect().is_empty());
    }

    /// A gate at one release: default, stage, locked (None: no such gate there).
    type Row = Option<(bool, Stage, bool)>;

    #[test]
    fn each_release_has_its_own_stages_and_defaults() {
        // (gate, [value at 1.34, 1.35, 1.36, 1.37]); None: the release has no such gate.
        let rows: &[(&str, [Row; 4])] = &[
            (
                "OpportunisticBatching",
                [
                    None,
                    Some((true, Beta, false)),
                    Some((true, Beta, false)),
                    Some((true, Beta, false)),
                ],
            ),
            (
                "GangScheduling",
                [
                    None,
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                    None,
                ],
            ),
            (
                "WorkloadAwarePreemption",
                [None, None, Some((false, Alpha, false)), None],
            ),
            (
                "GenericWorkload",
                [
                    None,
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                    Some((false, Beta, false)),
                ],
            ),
            (
                "TopologyAwareWorkloadScheduling",
                [
                    None,
                    None,
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                ],
            ),
            (
                "NodeDeclaredFeatures",
                [
                    None,
                    Some((false, Alpha, false)),
                    Some((true, Beta, false)),
                    Some((true, Ga, true)),
                ],
            ),
            (
                "DRAExtendedResource",
                [
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                    Some((true, Beta, false)),
                    Some((true, Ga, true)),
                ],
            ),
            (
                "DRAPrioritizedList",
                [
                    Some((true, Beta, false)),
                    Some((true, Beta, false)),
                    Some((true, Ga, false)),
                    Some((true, Ga, true)),
                ],
            ),
            (
                "DRADeviceTaints",
                [
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                    Some((true, Beta, false)),
                    Some((true, Ga, false)),
                ],
            ),
            (
                "StorageCapacityScoring",
                [
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                    Some((true, Beta, false)),
                ],
            ),
            (
                "TaintTolerationComparisonOperators",
                [
                    None,
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                    Some((false, Alpha, false)),
                ],
            ),
            (
                "NominatedNodeNameForExpectation",
                [
                    Some((false, Alpha, false)),
                    Some((true, Beta, false)),
                    Some((true, Beta, false)),
                    Some((true, Beta, false)),
                ],
            ),
            (
                "SidecarContainers",
                [Some((true, Ga, true)), Some((true, Ga, true)), None, None],
            ),
            ("SchedulerPopFromBackoffQ", [Some((true, Beta, false)); 4]),
        ];
        let versions = [
            Version::V1_34,
            Version::V1_35,
            Version::V1_36,
            Version::V1_37,
        ];
        for (name, want) in rows {
            for (version, want) in versions.iter().zip(want) {
                let got = def_of(name)
                    .and_then(|d| d.at(*version))
                    .map(|s| (s.default, s.stage, s.locked));
                assert_eq!(got, *want, "{name} at {version}");
            }
        }
        for version in versions {
            let names: Vec<&str> = known_features(version).iter().map(|f| f.name).collect();
            let mut sorted = names.clone();
            sorted.sort_unstable();
            assert_eq!(names, sorted, "the table is sorted by name");
        }
    }

    #[test]
    fn v1_37_defaults() {
        let g = FeatureGates::defaults();
        assert_eq!(g.version(), Version::V1_37);
        assert!(g.enabled(Feature::SchedulerAsyncPreemption));
        assert!(g.enabled(Feature::SchedulerPopFromBackoffQ));
        assert!(g.enabled(Feature::SchedulerQueueingHints));
        assert!(g.enabled(Feature::StorageCapacityScoring));
        assert!(!g.enabled(Feature::TaintTolerationComparisonOperators));
        assert_eq!(g.enabled_by_name("SchedulerAsyncAPICalls"), Some(false));
        assert_eq!(g.enabled_by_name("OpportunisticBatching"), Some(true));
        assert_eq!(g.enabled_by_name("GangScheduling"), None, "folded away");
        assert_eq!(g.enabled_by_name("NoSuchGate"), None);
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
        assert!(!g.enabled(Feature::StorageCapacityScoring));
        assert_eq!(g.enabled_by_name("DRASchedulerFilterTimeout"), Some(false));
        assert!(
            g.enabled(Feature::SchedulerQueueingHints),
            "locked gates stay"
        );
        assert_eq!(
            g.without_effect(),
            vec![
                "ClearingNominatedNodeNameAfterBinding",
                "DRAConsumableCapacity",
                "DRADeviceBindingConditions",
                "DRAPartitionableDevices",
                "DRASchedulerFilterTimeout",
                "InPlacePodLevelResourcesVerticalScaling",
                "MatchLabelKeysInPodTopologySpread",
                "MatchLabelKeysInPodTopologySpreadSelectorMerge",
                "OpportunisticBatching",
                "PodLevelResources",
            ]
        );
        // At v1.34 the same flag reaches v1.34's beta gates.
        let g = FeatureGates::parse_at(Version::V1_34, ["AllBeta=false"]).expect("valid");
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
                Version::V1_37,
                "Nope=true",
                "--feature-gates: unrecognized feature gate: Nope",
            ),
            (
                Version::V1_37,
                "SchedulerAsyncPreemption",
                "--feature-gates: \"SchedulerAsyncPreemption\" is not of the form Name=true|false",
            ),
            (
                Version::V1_37,
                "SchedulerAsyncPreemption=yes",
                "--feature-gates: invalid value of SchedulerAsyncPreemption=yes, err: must be true or false",
            ),
            (
                Version::V1_37,
                "SchedulerQueueingHints=false",
                "--feature-gates: cannot set feature gate SchedulerQueueingHints to false, feature is locked to true",
            ),
            // Removed by v1.37: unknown, as upstream says.
            (
                Version::V1_37,
                "GangScheduling=true",
                "--feature-gates: unrecognized feature gate: GangScheduling",
            ),
            (
                Version::V1_37,
                "SidecarContainers=true",
                "--feature-gates: unrecognized feature gate: SidecarContainers",
            ),
            // GA and locked in v1.37, still settable in v1.36.
            (
                Version::V1_37,
                "DRAExtendedResource=false",
                "--feature-gates: cannot set feature gate DRAExtendedResource to false, feature is locked to true",
            ),
            // Not there yet at v1.34.
            (
                Version::V1_34,
                "OpportunisticBatching=false",
                "--feature-gates: cannot set feature gate OpportunisticBatching to false, feature is PreAlpha at emulated version 1.34",
            ),
        ];
        for (version, flag, want) in cases {
            let err = FeatureGates::parse_at(version, [flag]).expect_err(flag);
            assert_eq!(err.to_string(), want);
        }
        assert!(FeatureGates::parse_at(Version::V1_36, ["DRAExtendedResource=false"]).is_ok());
        assert!(FeatureGates::parse_at(Version::V1_36, ["GangScheduling=true"]).is_ok());
        // Setting a locked gate to its own value is fine; so is GA left unlocked.
        let g = FeatureGates::parse(["SchedulerQueueingHints=true,DRADeviceTaints=false"])
            .expect("valid");
        assert_eq!(
            g.set_but_graduated(),
            vec!["DRADeviceTaints", "SchedulerQueueingHints"]
        );
        assert_eq!(g.without_effect(), vec!["DRADeviceTaints"]);
    }

    #[test]
    fn reads_the_emulated_version_as_upstream() {
        for (flag, want) in [
            ("1.34", Version::V1_34),
            ("v1.35", Version::V1_35),
            ("kube=1.36", Version::V1_36),
            ("1.37.2", Version::V1_37),
        ] {
            assert_eq!(Version::parse_emulated(flag), Ok(want), "{flag}");
        }
        for (flag, want) in [
            (
                "1.33",
                "--emulated-version: emulation version 1.33 is not between [1.34, 1.37]",
            ),
            (
                "1.38",
                "--emulated-version: emulation version 1.38 is not between [1.34, 1.37]",
            ),
            (
                "one.36",
                "--emulated-version: invalid version \"one.36\": want MAJOR.MINOR, e.g. 1.36",
            ),
            (
                "etcd=3.6",
                "--emulated-version: unknown component \"etcd\": kube-scheduler emulates only \"kube\"",
            ),
        ] {
            let err = Version::parse_emulated(flag).expect_err(flag);
            assert_eq!(err.to_string(), want);
        }
    }
}
