//! Where the framework reports how long extension points and plugins took, how often
//! plugins ran, how long pods waited at Permit and how many victims preemption chose.

use std::time::Duration;

use crate::{Code, ExtensionPoint};

/// Receives framework timings. The scheduler crate implements it with upstream's metric
/// names (`scheduler_framework_extension_point_duration_seconds`,
/// `scheduler_plugin_execution_duration_seconds`).
pub trait MetricsSink: Send + Sync {
    /// One run of a whole extension point for a pod.
    fn extension_point_duration(
        &self,
        profile: &str,
        point: ExtensionPoint,
        code: Code,
        duration: Duration,
    );
    /// One plugin call (only in cycles that sample plugin metrics).
    fn plugin_duration(&self, plugin: &str, point: ExtensionPoint, code: Code, duration: Duration);
    /// Several calls of one plugin at one point that all ended with `code` (a worker's
    /// share of a sampled Filter pass, recorded once the pass is done).
    fn plugin_durations(
        &self,
        plugin: &str,
        point: ExtensionPoint,
        code: Code,
        durations: &[Duration],
    ) {
        for d in durations {
            self.plugin_duration(plugin, point, code, *d);
        }
    }
    /// Preemption chose a node and is evicting this many victims
    /// (`scheduler_preemption_victims`).
    fn preemption_victims(&self, _victims: usize) {}
    /// A pod waited at Permit this long and ended with `code`
    /// (`scheduler_permit_wait_duration_seconds{result}`).
    fn permit_wait(&self, _code: Code, _duration: Duration) {}
    /// A plugin was run `count` times at a point for pods of a profile
    /// (`scheduler_plugin_evaluation_total`; PreFilter, Filter, PreScore and Score).
    fn plugin_evaluations(
        &self,
        _profile: &str,
        _point: ExtensionPoint,
        _plugin: &str,
        _count: u64,
    ) {
    }
}

/// Discards every timing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;

impl MetricsSink for NoMetrics {
    fn extension_point_duration(&self, _: &str, _: ExtensionPoint, _: Code, _: Duration) {}
    fn plugin_duration(&self, _: &str, _: ExtensionPoint, _: Code, _: Duration) {}
}
