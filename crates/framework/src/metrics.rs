//! Where the framework reports how long extension points and plugins took, how often
//! plugins ran, how long pods waited at Permit and how many victims preemption chose;
//! and the counters plugins keep under their own names ([`PluginMetrics`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// Counters plugins keep under their own metric names, shown on /metrics beside the
/// scheduler's. Upstream's plugins register such families in the process-wide registry
/// (VolumeBinding's `scheduler_volume_scheduling_stage_error_total`); here they live on the
/// [`Handle`](crate::Handle), so two schedulers in one process (tests, simulations) do not
/// count into each other. A family is registered once by name: every profile's instance
/// of a plugin shares it, as upstream's single registration does.
#[derive(Debug, Default)]
pub struct PluginMetrics {
    families: parking_lot::RwLock<Vec<Arc<CounterFamily>>>,
}

/// A counter family with one label: `name_total{label="value"}`.
#[derive(Debug)]
pub struct CounterFamily {
    /// Without the `_total` suffix, as OpenMetrics names a counter family.
    name: String,
    help: String,
    label: String,
    /// By label value; a value appears once counted, as client_golang's children do.
    counts: parking_lot::RwLock<BTreeMap<String, Arc<AtomicU64>>>,
}

impl CounterFamily {
    /// Adds one to the counter of `value`.
    pub fn inc(&self, value: &str) {
        if let Some(c) = self.counts.read().get(value) {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.counts
            .write()
            .entry(value.to_string())
            .or_default()
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The count of `value` (0 before its first count).
    pub fn get(&self, value: &str) -> u64 {
        self.counts
            .read()
            .get(value)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

impl PluginMetrics {
    /// The counter family `name` (given without `_total`), registered on first use; a
    /// later call with the same name returns the same family, whatever its help says.
    pub fn counter_family(&self, name: &str, help: &str, label: &str) -> Arc<CounterFamily> {
        if let Some(f) = self.families.read().iter().find(|f| f.name == name) {
            return f.clone();
        }
        let mut families = self.families.write();
        if let Some(f) = families.iter().find(|f| f.name == name) {
            return f.clone();
        }
        let family = Arc::new(CounterFamily {
            name: name.to_string(),
            help: help.to_string(),
            label: label.to_string(),
            counts: Default::default(),
        });
        families.push(family.clone());
        family
    }

    /// The families in OpenMetrics text (what the scheduler's registry writes, so the two
    /// are converted to Prometheus text together), without the closing `# EOF`.
    pub fn encode_openmetrics(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for f in self.families.read().iter() {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
            let _ = writeln!(out, "# TYPE {} counter", f.name);
            for (value, count) in f.counts.read().iter() {
                let _ = writeln!(
                    out,
                    "{}_total{{{}=\"{}\"}} {}",
                    f.name,
                    f.label,
                    escape_label(value),
                    count.load(Ordering::Relaxed)
                );
            }
        }
        out
    }
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_is_registered_once_and_shows_only_counted_values() {
        let m = PluginMetrics::default();
        let a = m.counter_family(
            "scheduler_volume_scheduling_stage_error",
            "Volume scheduling stage error count",
            "operation",
        );
        let b = m.counter_family(
            "scheduler_volume_scheduling_stage_error",
            "other help",
            "operation",
        );
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(
            m.encode_openmetrics(),
            "# HELP scheduler_volume_scheduling_stage_error Volume scheduling stage error count\n\
             # TYPE scheduler_volume_scheduling_stage_error counter\n"
        );
        a.inc("bind");
        b.inc("bind");
        a.inc("predicate\"x");
        assert_eq!(a.get("bind"), 2);
        assert_eq!(a.get("assume"), 0);
        assert_eq!(
            m.encode_openmetrics(),
            "# HELP scheduler_volume_scheduling_stage_error Volume scheduling stage error count\n\
             # TYPE scheduler_volume_scheduling_stage_error counter\n\
             scheduler_volume_scheduling_stage_error_total{operation=\"bind\"} 2\n\
             scheduler_volume_scheduling_stage_error_total{operation=\"predicate\\\"x\"} 1\n"
        );
    }
}
