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
    /// Families with several labels (counters and histograms), in registration order.
    vecs: parking_lot::RwLock<Vec<Arc<VecFamily>>>,
}

/// What a [`VecFamily`] measures.
#[derive(Debug, Clone, PartialEq)]
enum VecKind {
    Counter,
    /// Upper bounds of the buckets, ascending (`+Inf` is implied).
    Histogram(Vec<f64>),
}

/// One label set's value: a count, or a histogram's bucket counts, sum and count.
#[derive(Debug, Default)]
struct Series {
    count: u64,
    sum: f64,
    buckets: Vec<u64>,
}

/// A counter or histogram family with several labels, as client_golang's `CounterVec`
/// and `HistogramVec`: `name_total{a="x",b="y"}`, or `name_bucket{…,le="…"}`, `name_sum`
/// and `name_count`. A label set appears once it was counted or observed.
#[derive(Debug)]
pub struct VecFamily {
    name: String,
    help: String,
    labels: Vec<String>,
    kind: VecKind,
    series: parking_lot::Mutex<BTreeMap<Vec<String>, Series>>,
}

impl VecFamily {
    /// Adds one to the counter of these label values (in the family's label order).
    pub fn inc(&self, values: &[&str]) {
        self.series.lock().entry(key(values)).or_default().count += 1;
    }

    /// Records one observation (a histogram; a counter counts it).
    pub fn observe(&self, values: &[&str], value: f64) {
        let mut series = self.series.lock();
        let s = series.entry(key(values)).or_default();
        s.count += 1;
        s.sum += value;
        if let VecKind::Histogram(bounds) = &self.kind {
            if s.buckets.len() != bounds.len() {
                s.buckets = vec![0; bounds.len()];
            }
            for (i, bound) in bounds.iter().enumerate() {
                if value <= *bound {
                    s.buckets[i] += 1;
                }
            }
        }
    }

    /// How many times these label values were counted or observed.
    pub fn count(&self, values: &[&str]) -> u64 {
        self.series.lock().get(&key(values)).map_or(0, |s| s.count)
    }

    fn encode(&self, out: &mut String) {
        use std::fmt::Write as _;
        let kind = match self.kind {
            VecKind::Counter => "counter",
            VecKind::Histogram(_) => "histogram",
        };
        let _ = writeln!(out, "# HELP {} {}", self.name, escape_help(&self.help));
        let _ = writeln!(out, "# TYPE {} {kind}", self.name);
        for (values, s) in self.series.lock().iter() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .zip(values)
                .map(|(l, v)| format!("{l}=\"{}\"", escape_label(v)))
                .collect();
            let labels = labels.join(",");
            match &self.kind {
                VecKind::Counter => {
                    let _ = writeln!(out, "{}_total{{{labels}}} {}", self.name, s.count);
                }
                VecKind::Histogram(bounds) => {
                    let sep = if labels.is_empty() { "" } else { "," };
                    for (i, bound) in bounds.iter().enumerate() {
                        let n = s.buckets.get(i).copied().unwrap_or(0);
                        let _ = writeln!(
                            out,
                            "{}_bucket{{{labels}{sep}le=\"{}\"}} {n}",
                            self.name,
                            format_bound(*bound)
                        );
                    }
                    let _ = writeln!(
                        out,
                        "{}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
                        self.name, s.count
                    );
                    let _ = writeln!(out, "{}_sum{{{labels}}} {}", self.name, s.sum);
                    let _ = writeln!(out, "{}_count{{{labels}}} {}", self.name, s.count);
                }
            }
        }
    }
}

fn key(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

/// A bucket bound as client_golang writes it (`0.1`, `1`, `819.2`).
fn format_bound(bound: f64) -> String {
    let text = format!("{bound}");
    if text.contains('.') || text.contains('e') {
        text
    } else {
        format!("{text}.0")
    }
}

/// client_golang's `ExponentialBuckets(start, factor, count)`.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(count);
    let mut next = start;
    for _ in 0..count {
        out.push(next);
        next *= factor;
    }
    out
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

    /// The counter family `name` (given without `_total`) with these labels, registered
    /// on first use; a later call with the same name returns the same family.
    pub fn counter_vec(&self, name: &str, help: &str, labels: &[&str]) -> Arc<VecFamily> {
        self.vec_family(name, help, labels, VecKind::Counter)
    }

    /// The histogram family `name` with these labels and bucket bounds, registered on
    /// first use; a later call with the same name returns the same family.
    pub fn histogram_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: Vec<f64>,
    ) -> Arc<VecFamily> {
        self.vec_family(name, help, labels, VecKind::Histogram(buckets))
    }

    fn vec_family(&self, name: &str, help: &str, labels: &[&str], kind: VecKind) -> Arc<VecFamily> {
        if let Some(f) = self.vecs.read().iter().find(|f| f.name == name) {
            return f.clone();
        }
        let mut vecs = self.vecs.write();
        if let Some(f) = vecs.iter().find(|f| f.name == name) {
            return f.clone();
        }
        let family = Arc::new(VecFamily {
            name: name.to_string(),
            help: help.to_string(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            kind,
            series: Default::default(),
        });
        vecs.push(family.clone());
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
        for f in self.vecs.read().iter() {
            f.encode(&mut out);
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
    fn counter_and_histogram_vecs_write_every_label_set_seen() {
        let m = PluginMetrics::default();
        let creates = m.counter_vec(
            "dynamic_resource_allocation_resourceclaim_creates",
            "Number of ResourceClaims creation requests",
            &["status", "admin_access"],
        );
        creates.inc(&["success", "false"]);
        creates.inc(&["success", "false"]);
        let wait = m.histogram_vec(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            "Time spent waiting",
            &["profile", "driver", "status"],
            exponential_buckets(0.1, 2.0, 3),
        );
        wait.observe(&["default-scheduler", "gpu.example.com", "success"], 0.3);
        assert_eq!(creates.count(&["success", "false"]), 2);
        assert_eq!(creates.count(&["failure", "false"]), 0);
        assert_eq!(
            m.encode_openmetrics(),
            "# HELP dynamic_resource_allocation_resourceclaim_creates Number of ResourceClaims creation requests\n\
             # TYPE dynamic_resource_allocation_resourceclaim_creates counter\n\
             dynamic_resource_allocation_resourceclaim_creates_total{status=\"success\",admin_access=\"false\"} 2\n\
             # HELP scheduler_dra_bindingconditions_wait_duration_seconds Time spent waiting\n\
             # TYPE scheduler_dra_bindingconditions_wait_duration_seconds histogram\n\
             scheduler_dra_bindingconditions_wait_duration_seconds_bucket{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"success\",le=\"0.1\"} 0\n\
             scheduler_dra_bindingconditions_wait_duration_seconds_bucket{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"success\",le=\"0.2\"} 0\n\
             scheduler_dra_bindingconditions_wait_duration_seconds_bucket{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"success\",le=\"0.4\"} 1\n\
             scheduler_dra_bindingconditions_wait_duration_seconds_bucket{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"success\",le=\"+Inf\"} 1\n\
             scheduler_dra_bindingconditions_wait_duration_seconds_sum{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"success\"} 0.3\n\
             scheduler_dra_bindingconditions_wait_duration_seconds_count{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"success\"} 1\n"
        );
        assert_eq!(
            exponential_buckets(0.1, 2.0, 14).last().copied(),
            Some(819.2)
        );
    }

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
