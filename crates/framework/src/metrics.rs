//! Where the framework reports how long extension points and plugins took.

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
    /// Preemption chose a node and is evicting this many victims
    /// (`scheduler_preemption_victims`).
    fn preemption_victims(&self, _victims: usize) {}
}

/// Discards every timing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;

impl MetricsSink for NoMetrics {
    fn extension_point_duration(&self, _: &str, _: ExtensionPoint, _: Code, _: Duration) {}
    fn plugin_duration(&self, _: &str, _: ExtensionPoint, _: Code, _: Duration) {}
}
