//! `InterPodAffinityArgs`, with upstream's defaults and validation.

use kubesched_framework::registry::PluginArgs;
use serde::{Deserialize, Serialize};

/// The lowest allowed `hardPodAffinityWeight`.
pub const MIN_HARD_POD_AFFINITY_WEIGHT: i32 = 0;
/// The highest allowed `hardPodAffinityWeight`.
pub const MAX_HARD_POD_AFFINITY_WEIGHT: i32 = 100;

/// Arguments of the InterPodAffinity plugin (`pluginConfig[].args`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InterPodAffinityArgs {
    /// Score weight given to an existing pod's required affinity term that the incoming
    /// pod matches (0 turns that part of scoring off). 0..=100, default 1.
    pub hard_pod_affinity_weight: i32,
    /// When the incoming pod has no preferred inter-pod terms, skip scoring altogether
    /// instead of honouring existing pods' preferred terms. Default false.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        Self {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

impl PluginArgs for InterPodAffinityArgs {
    const KIND: &'static str = "InterPodAffinityArgs";

    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
        let w = self.hard_pod_affinity_weight;
        if !(MIN_HARD_POD_AFFINITY_WEIGHT..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(&w) {
            return Err(format!(
                "hardPodAffinityWeight: Invalid value: {w}: not in valid range \
                 [{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]"
            ));
        }
        Ok(())
    }
}
