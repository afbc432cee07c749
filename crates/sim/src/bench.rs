//! The benchmark suite's measuring side: run one workload file with the default profile,
//! time its measured phase, and report throughput, attempt latency, peak memory and where
//! the plugins spent their time; render many such results as Markdown or JSON.
//!
//! Workload files live in `benchmarks/`, one per upstream scheduler_perf workload and size
//! (`SchedulingBasic-5000Nodes.yaml` holds `SchedulingBasic/5000Nodes`). The measured
//! phase is every `createPods` op with `measure: true`: its clock starts before the pods
//! are created and stops when they have all been tried and bound (see the runner), so
//! pods/s covers creation, queueing, the scheduling cycle and binding on the in-memory
//! cluster. The binary runs each workload in its own child process so that the peak RSS
//! of one workload is not hidden by another's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::report::percentile;
use crate::runner::{SimError, Simulation, SimulationOptions};
use crate::workload::{Op, Workload, WorkloadError};

pub mod dump;
pub mod load;
pub mod scheduler_perf;

/// Attempt latency percentiles of the measured pods, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Time one plugin spent at one extension point during the measured phase.
///
/// The scheduler records plugin durations for a sample of attempts only (as upstream
/// does), so `seconds` is a sample total: compare plugins with each other, not with wall
/// time. Filter runs for every node of a cycle on several threads, so the Filter totals
/// can exceed the wall time of the attempts they were sampled from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginTime {
    /// The plugin.
    pub plugin: String,
    /// The extension point.
    pub extension_point: String,
    /// Sum of the sampled calls, in seconds.
    pub seconds: f64,
    /// Sampled calls.
    pub calls: u64,
}

/// The result of one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// The workload's name, `Name/500Nodes`.
    pub workload: String,
    /// Nodes in the cluster at the end.
    pub nodes: usize,
    /// Pods created by measured `createPods` ops.
    pub measured_pods: usize,
    /// Measured pods scheduled per second of the measured phase.
    pub pods_per_second: f64,
    /// Attempt latency of the measured pods (pop to bound, or to failure).
    pub latency_ms: LatencyMs,
    /// Peak resident set size of the process that ran the workload (`VmHWM`), when the
    /// platform reports it.
    pub peak_rss_bytes: Option<u64>,
    /// Wall time of the measured phase.
    pub measured_seconds: f64,
    /// CPU time (user + system, all threads) the process used from the first measured op
    /// to the end, when the platform reports it. Unlike wall time it barely moves when
    /// other processes compete for the cores.
    #[serde(default)]
    pub measured_cpu_seconds: Option<f64>,
    /// Scheduling attempts of the measured pods (more than the pods when some were retried).
    pub attempts: u64,
    /// Nodes the scheduling cycles ran Filter on during the measured phase, by the
    /// scheduler's own count (see `Scheduler::nodes_filtered`).
    #[serde(default)]
    pub nodes_examined: u64,
    /// `nodes_examined` per second of the measured phase: the cost per node, which stays
    /// comparable across cluster sizes where pods/s does not (adaptive sampling makes each
    /// pod look at 2,500 of 50,000 nodes but 500 of 5,000).
    #[serde(default)]
    pub nodes_examined_per_second: f64,
    /// The factor every count was multiplied by (1 for a real run).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub scale: f64,
    /// Plugins of upstream's default profile that this binary does not have (the default
    /// profile ran without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent_default_plugins: Vec<String>,
    /// Plugin time during the measured phase, largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breakdown: Vec<PluginTime>,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// How a workload is run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchOptions {
    /// Tie-breaking seed.
    pub seed: u64,
    /// Multiplies every node and pod count (see [`scale_workload`]); 1 for real numbers.
    pub scale: f64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            seed: 0,
            scale: 1.0,
        }
    }
}

/// A benchmark could not run or its result is not a valid measurement.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A workload file is unreadable or invalid.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The benchmarks folder could not be listed.
    #[error("{dir}: cannot list workload files: {source}")]
    Dir {
        /// The folder.
        dir: String,
        /// Why.
        source: std::io::Error,
    },
    /// Two files hold workloads of the same name.
    #[error("workload {name} is defined twice: {first} and {second}")]
    Duplicate {
        /// The workload name.
        name: String,
        /// One file.
        first: String,
        /// The other.
        second: String,
    },
    /// The run failed.
    #[error(transparent)]
    Run(#[from] SimError),
    /// Nothing was measured.
    #[error("workload {0} has no createPods op with measure: true")]
    NothingMeasured(String),
    /// Some measured pods were never scheduled, so the rate would not be a throughput.
    #[error("workload {workload}: only {scheduled} of {measured} measured pods were scheduled")]
    NotAllScheduled {
        /// The workload.
        workload: String,
        /// Scheduled measured pods.
        scheduled: usize,
        /// Measured pods.
        measured: usize,
    },
    /// The scale factor is out of range.
    #[error("scale must be in (0, 1], got {0}")]
    Scale(f64),
    /// The workload's `featureGates` cannot be set.
    #[error("workload {workload}: featureGates: {source}")]
    FeatureGates {
        /// The workload.
        workload: String,
        /// Why.
        source: kubesched_framework::FeatureGateError,
    },
}

/// The feature gates a workload runs under: `base` with the workload's `featureGates` set
/// on top (the same rules as `--feature-gates`).
pub fn workload_gates(
    workload: &Workload,
    base: &kubesched_framework::FeatureGates,
) -> Result<kubesched_framework::FeatureGates, BenchError> {
    let mut gates = base.clone();
    for (name, on) in &workload.feature_gates {
        gates = gates
            .with_name(name, *on)
            .map_err(|source| BenchError::FeatureGates {
                workload: workload.name.clone(),
                source,
            })?;
    }
    Ok(gates)
}

/// The default configuration a workload runs with on its own: the default profile under
/// the release's gates and the workload's `featureGates` (GenericWorkload adds
/// GangScheduling to the default plugins, as upstream's defaulting does).
pub fn default_config_for(
    workload: &Workload,
) -> Result<kubesched_config::LoadedConfig, BenchError> {
    if workload.feature_gates.is_empty() {
        return Ok(kubesched_config::default_config());
    }
    let gates = workload_gates(workload, &kubesched_framework::FeatureGates::defaults())?;
    let mut loaded = kubesched_config::default_config_with_gates(&gates);
    loaded.feature_gates = gates;
    Ok(loaded)
}

/// A workload file of the suite.
#[derive(Debug, Clone)]
pub struct BenchWorkload {
    /// The file.
    pub path: PathBuf,
    /// Its contents.
    pub workload: Workload,
}

impl BenchWorkload {
    /// Nodes the workload creates.
    pub fn node_count(&self) -> usize {
        self.workload
            .ops
            .iter()
            .map(|op| match op {
                Op::CreateNodes(c) => c.count,
                _ => 0,
            })
            .sum()
    }

    /// The family name: the workload name up to its first `/`.
    pub fn family(&self) -> &str {
        let name = self.workload.name.as_str();
        name.split_once('/').map_or(name, |(family, _)| family)
    }
}

/// Every `*.yaml` workload in `dir`, parsed, those whose name contains `filter` (all when
/// None), ordered by family name then node count. Any invalid file is an error, filtered
/// out or not, so a broken workload cannot go unnoticed.
pub fn discover(dir: &Path, filter: Option<&str>) -> Result<Vec<BenchWorkload>, BenchError> {
    let dir_err = |source| BenchError::Dir {
        dir: dir.display().to_string(),
        source,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(dir_err)? {
        let path = entry.map_err(dir_err)?.path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut all = Vec::new();
    for path in paths {
        let workload = Workload::from_file(&path)?;
        if let Some(first) = seen.insert(workload.name.clone(), path.clone()) {
            return Err(BenchError::Duplicate {
                name: workload.name,
                first: first.display().to_string(),
                second: path.display().to_string(),
            });
        }
        all.push(BenchWorkload { path, workload });
    }
    let mut selected: Vec<BenchWorkload> = all
        .into_iter()
        .filter(|w| filter.is_none_or(|f| w.workload.name.contains(f)))
        .collect();
    selected.sort_by(|a, b| {
        (a.family(), a.node_count(), &a.workload.name).cmp(&(
            b.family(),
            b.node_count(),
            &b.workload.name,
        ))
    });
    Ok(selected)
}

fn scale_count(count: usize, factor: f64) -> usize {
    if count == 0 {
        return 0;
    }
    ((count as f64 * factor).ceil() as usize).max(1)
}

/// A copy of the workload with every node and pod count multiplied by `factor` (rounded
/// up, at least one), for quick checks of a workload's shape. `expect` ops are dropped:
/// their totals do not scale exactly; the bench still checks that every measured pod was
/// scheduled.
pub fn scale_workload(workload: &Workload, factor: f64) -> Workload {
    let mut scaled = workload.clone();
    if factor == 1.0 {
        return scaled;
    }
    scaled.ops = workload
        .ops
        .iter()
        .filter(|op| !matches!(op, Op::Expect(_)))
        .cloned()
        .map(|op| match op {
            Op::CreateNodes(mut c) => {
                c.count = scale_count(c.count, factor);
                Op::CreateNodes(c)
            }
            Op::CreatePods(mut c) => {
                c.count = scale_count(c.count, factor);
                c.schedule_every = scale_count(c.schedule_every, factor);
                // Groups shrink with the pods, so a scaled gang can still be placed whole.
                if let Some(g) = &mut c.pod_groups {
                    g.size = scale_count(g.size, factor);
                    g.min_count = g.min_count.map(|m| scale_count(m as usize, factor) as u32);
                }
                Op::CreatePods(c)
            }
            Op::DeletePods(mut d) => {
                d.count = d.count.map(|n| scale_count(n, factor));
                Op::DeletePods(d)
            }
            other => other,
        })
        .collect();
    scaled
}

/// Peak resident set size of this process (`VmHWM` in /proc/self/status), on Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

/// CPU time (user + system) this process has used, from /proc/self/stat, on Linux.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_cpu_seconds(&stat)
}

fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    // The command name may hold spaces, so count fields after its closing parenthesis:
    // state is the first there, utime the 12th and stime the 13th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // The kernel reports these in USER_HZ ticks, 100 per second on every Linux platform.
    Some((utime + stime) as f64 / 100.0)
}

fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut parts = line["VmHWM:".len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => Some(value * 1024),
        Some(_) => None,
    }
}

type Totals = BTreeMap<(String, String), (f64, u64)>;

fn plugin_totals(sim: &Simulation) -> Totals {
    sim.scheduler()
        .metrics()
        .plugin_duration_totals()
        .into_iter()
        .map(|t| ((t.plugin, t.extension_point), (t.seconds, t.count)))
        .collect()
}

fn breakdown_between(before: &Totals, after: &Totals) -> Vec<PluginTime> {
    let mut out: Vec<PluginTime> = after
        .iter()
        .filter_map(|((plugin, point), &(seconds, calls))| {
            let (s0, c0) = before
                .get(&(plugin.clone(), point.clone()))
                .copied()
                .unwrap_or_default();
            let calls = calls.saturating_sub(c0);
            (calls > 0).then(|| PluginTime {
                plugin: plugin.clone(),
                extension_point: point.clone(),
                seconds: (seconds - s0).max(0.0),
                calls,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.seconds
            .total_cmp(&a.seconds)
            .then_with(|| a.plugin.cmp(&b.plugin))
            .then_with(|| a.extension_point.cmp(&b.extension_point))
    });
    out
}

/// Runs one workload with the default profile and every plugin of it this binary has,
/// and measures it. The process's peak RSS is read at the end, so run one workload per
/// process for a meaningful figure.
pub async fn run_workload(
    workload: &Workload,
    options: BenchOptions,
) -> Result<BenchResult, BenchError> {
    // The default profile as this binary has it; upstream default plugins it lacks are
    // recorded in the result rather than hidden.
    run_workload_with(workload, options, &default_config_for(workload)?).await
}

/// [`run_workload`] with the scheduler configuration `loaded` instead of the default
/// profile (`kubesched bench --config`: a profile with an extra plugin, against the same
/// workload without it).
pub async fn run_workload_with(
    workload: &Workload,
    options: BenchOptions,
    loaded: &kubesched_config::LoadedConfig,
) -> Result<BenchResult, BenchError> {
    if !(options.scale > 0.0 && options.scale <= 1.0) {
        return Err(BenchError::Scale(options.scale));
    }
    let workload = scale_workload(workload, options.scale);
    let Some(first_measured) = workload
        .ops
        .iter()
        .position(|op| matches!(op, Op::CreatePods(c) if c.measure && c.count > 0))
    else {
        return Err(BenchError::NothingMeasured(workload.name.clone()));
    };
    let mut sim = Simulation::new(
        loaded,
        SimulationOptions {
            seed: Some(options.seed),
            explain: None,
            progress: None,
        },
    )?;
    // Setup first, then the plugin totals, so the breakdown covers the measured phase only.
    sim.run_workload_ops(&workload, 0..first_measured).await?;
    let before = plugin_totals(&sim);
    let filtered_before = sim.scheduler().nodes_filtered();
    let cpu_before = process_cpu_seconds();
    sim.run_workload_ops(&workload, first_measured..workload.ops.len())
        .await?;
    let cpu_after = process_cpu_seconds();
    let after = plugin_totals(&sim);
    let nodes_examined = sim.scheduler().nodes_filtered() - filtered_before;

    let (elapsed, measured_pods, mut latencies) = sim.measured();
    let scheduled = sim.measured_scheduled();
    if scheduled < measured_pods {
        return Err(BenchError::NotAllScheduled {
            workload: workload.name.clone(),
            scheduled,
            measured: measured_pods,
        });
    }
    latencies.sort_unstable();
    let seconds = elapsed.as_secs_f64();
    let per_second = |n: f64| if seconds > 0.0 { n / seconds } else { 0.0 };
    Ok(BenchResult {
        workload: workload.name.clone(),
        nodes: sim.cluster().node_count(),
        measured_pods,
        pods_per_second: per_second(scheduled as f64),
        latency_ms: LatencyMs {
            p50: percentile(&latencies, 50.0),
            p90: percentile(&latencies, 90.0),
            p99: percentile(&latencies, 99.0),
        },
        peak_rss_bytes: peak_rss_bytes(),
        measured_seconds: seconds,
        measured_cpu_seconds: cpu_before
            .zip(cpu_after)
            .map(|(before, after)| (after - before).max(0.0)),
        attempts: latencies.len() as u64,
        nodes_examined,
        nodes_examined_per_second: per_second(nodes_examined as f64),
        scale: options.scale,
        absent_default_plugins: loaded.absent_default_plugins.clone(),
        breakdown: breakdown_between(&before, &after),
    })
}

/// Runs one workload on a fresh current-thread runtime, as the suite's child processes do.
pub fn run_workload_blocking(
    workload: &Workload,
    options: BenchOptions,
) -> Result<BenchResult, BenchError> {
    run_workload_blocking_with(workload, options, &default_config_for(workload)?)
}

/// [`run_workload_blocking`] with the scheduler configuration `loaded`.
pub fn run_workload_blocking_with(
    workload: &Workload,
    options: BenchOptions,
    loaded: &kubesched_config::LoadedConfig,
) -> Result<BenchResult, BenchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| {
            BenchError::Run(SimError::Build(format!("starting the async runtime: {e}")))
        })?;
    runtime.block_on(run_workload_with(workload, options, loaded))
}

/// The results as a JSON list.
pub fn to_json(results: &[BenchResult]) -> String {
    serde_json::to_string_pretty(results).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "-".into(), |b| format!("{:.0}", b as f64 / 1048576.0))
}

fn per_cpu_second(r: &BenchResult) -> String {
    match r.measured_cpu_seconds {
        Some(cpu) if cpu > 0.0 => format!("{:.0}", r.measured_pods as f64 / cpu),
        _ => "-".into(),
    }
}

/// A Markdown table of the results, one row per workload.
pub fn to_markdown(results: &[BenchResult]) -> String {
    let mut out = String::from(
        "| Workload | Nodes | Measured pods | Pods/s | Nodes examined/s | p50 ms | p90 ms | p99 ms | Peak RSS MiB | Pods per CPU-s |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in results {
        let scale = if r.scale == 1.0 {
            String::new()
        } else {
            format!(" (scale {})", r.scale)
        };
        let _ = writeln!(
            out,
            "| {}{} | {} | {} | {:.0} | {:.0} | {:.3} | {:.3} | {:.3} | {} | {} |",
            r.workload,
            scale,
            r.nodes,
            r.measured_pods,
            r.pods_per_second,
            r.nodes_examined_per_second,
            r.latency_ms.p50,
            r.latency_ms.p90,
            r.latency_ms.p99,
            mib(r.peak_rss_bytes),
            per_cpu_second(r)
        );
    }
    out
}

/// Per workload, the plugins that took the largest share of the sampled plugin time in the
/// measured phase (at most `top` rows each), as Markdown.
pub fn breakdown_markdown(results: &[BenchResult], top: usize) -> String {
    let mut out = String::new();
    for r in results.iter().filter(|r| !r.breakdown.is_empty()) {
        let total: f64 = r.breakdown.iter().map(|p| p.seconds).sum();
        let _ = writeln!(
            out,
            "\n**{}**: sampled plugin time by plugin and extension point\n\n\
             | Plugin | Extension point | Share | Sampled calls | µs per call |\n\
             | --- | --- | ---: | ---: | ---: |",
            r.workload
        );
        for p in r.breakdown.iter().take(top) {
            let share = if total > 0.0 {
                100.0 * p.seconds / total
            } else {
                0.0
            };
            let per_call = if p.calls > 0 {
                p.seconds * 1e6 / p.calls as f64
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} % | {} | {:.2} |",
                p.plugin, p.extension_point, share, p.calls, per_call
            );
        }
    }
    out
}

/// Seconds as a short human duration, for progress messages.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = "
kind: Workload
name: Tiny/10Nodes
ops:
- createNodes: {count: 10}
- createPods: {count: 25, namespace: a}
- createPods: {count: 100, namespace: b, measure: true, scheduleEvery: 10}
- deletePods: {namespace: a, count: 3}
- expect: {scheduled: 125}
";

    fn counts(w: &Workload) -> Vec<(&'static str, usize)> {
        w.ops
            .iter()
            .map(|op| match op {
                Op::CreateNodes(c) => ("nodes", c.count),
                Op::CreatePods(c) => ("pods", c.count),
                Op::DeletePods(d) => ("delete", d.count.unwrap_or(usize::MAX)),
                Op::Expect(_) => ("expect", 0),
                _ => ("other", 0),
            })
            .collect()
    }

    #[test]
    fn scaling_rounds_up_and_drops_expectations() {
        let w = Workload::from_str(TINY, "tiny.yaml").expect("valid");
        let s = scale_workload(&w, 0.1);
        assert_eq!(
            counts(&s),
            vec![("nodes", 1), ("pods", 3), ("pods", 10), ("delete", 1)]
        );
        let Op::CreatePods(c) = &s.ops[2] else {
            panic!("createPods expected")
        };
        assert_eq!(c.schedule_every, 1);
        assert!(c.measure);
    }

    #[test]
    fn scale_one_keeps_the_workload() {
        let w = Workload::from_str(TINY, "tiny.yaml").expect("valid");
        assert_eq!(counts(&scale_workload(&w, 1.0)), counts(&w));
    }

    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let status = "Name:\tkubesched\nVmPeak:\t  300 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(123456 * 1024));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
    }

    #[test]
    fn cpu_time_is_read_after_the_command_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        let stat = "42 (kube sched) R 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3";
        assert_eq!(parse_cpu_seconds(stat), Some(3.0));
        assert_eq!(parse_cpu_seconds("42 (x) R 1"), None);
        assert!(process_cpu_seconds().is_none_or(|s| s >= 0.0));
    }

    #[test]
    fn breakdown_covers_only_calls_after_the_snapshot() {
        let key = |p: &str, e: &str| (p.to_string(), e.to_string());
        let before: Totals = [
            (key("NodeResourcesFit", "Filter"), (1.0, 10)),
            (key("TaintToleration", "Filter"), (0.5, 10)),
        ]
        .into();
        let after: Totals = [
            (key("NodeResourcesFit", "Filter"), (3.0, 30)),
            (key("TaintToleration", "Filter"), (0.5, 10)),
            (key("NodeAffinity", "Score"), (4.0, 5)),
        ]
        .into();
        let b = breakdown_between(&before, &after);
        let view: Vec<(&str, &str, f64, u64)> = b
            .iter()
            .map(|p| {
                (
                    p.plugin.as_str(),
                    p.extension_point.as_str(),
                    p.seconds,
                    p.calls,
                )
            })
            .collect();
        assert_eq!(
            view,
            vec![
                ("NodeAffinity", "Score", 4.0, 5),
                ("NodeResourcesFit", "Filter", 2.0, 20),
            ]
        );
    }

    fn result(name: &str) -> BenchResult {
        BenchResult {
            workload: name.into(),
            nodes: 500,
            measured_pods: 1000,
            pods_per_second: 12345.6,
            latency_ms: LatencyMs {
                p50: 0.05,
                p90: 0.1,
                p99: 0.25,
            },
            peak_rss_bytes: Some(64 * 1048576),
            measured_seconds: 0.081,
            measured_cpu_seconds: Some(0.09),
            attempts: 1000,
            nodes_examined: 230_000,
            nodes_examined_per_second: 2_839_506.2,
            scale: 1.0,
            absent_default_plugins: Vec::new(),
            breakdown: vec![
                PluginTime {
                    plugin: "NodeResourcesFit".into(),
                    extension_point: "Filter".into(),
                    seconds: 0.003,
                    calls: 1000,
                },
                PluginTime {
                    plugin: "TaintToleration".into(),
                    extension_point: "Filter".into(),
                    seconds: 0.001,
                    calls: 1000,
                },
            ],
        }
    }

    #[test]
    fn markdown_has_one_row_per_workload() {
        let md = to_markdown(&[result("SchedulingBasic/500Nodes")]);
        assert_eq!(
            md.lines().nth(2),
            Some(
                "| SchedulingBasic/500Nodes | 500 | 1000 | 12346 | 2839506 | 0.050 | 0.100 | 0.250 | 64 | 11111 |"
            )
        );
        let b = breakdown_markdown(&[result("SchedulingBasic/500Nodes")], 1);
        assert!(
            b.contains("| NodeResourcesFit | Filter | 75.0 % | 1000 | 3.00 |"),
            "{b}"
        );
        assert!(!b.contains("TaintToleration"), "{b}");
    }

    #[test]
    fn json_round_trips_and_has_the_documented_fields() {
        let json = to_json(&[result("SchedulingBasic/500Nodes")]);
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        let first = &v[0];
        for field in [
            "workload",
            "nodes",
            "measured_pods",
            "pods_per_second",
            "nodes_examined_per_second",
            "peak_rss_bytes",
        ] {
            assert!(first.get(field).is_some(), "{field} missing in {json}");
        }
        assert_eq!(first["latency_ms"]["p99"], 0.25);
        assert!(first.get("scale").is_none(), "scale 1 is left out");
        let back: Vec<BenchResult> = serde_json::from_str(&json).expect("parse back");
        assert_eq!(back, vec![result("SchedulingBasic/500Nodes")]);
    }

    #[test]
    fn discover_orders_by_family_then_size_and_filters_by_name() {
        let dir = std::env::temp_dir().join(format!("kubesched-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = |name: &str, nodes: usize| {
            format!("kind: Workload\nname: {name}\nops:\n- createNodes: {{count: {nodes}}}\n")
        };
        for (f, name, nodes) in [
            ("B-5000Nodes.yaml", "B/5000Nodes", 5000),
            ("B-500Nodes.yaml", "B/500Nodes", 500),
            ("A-5000Nodes.yaml", "A/5000Nodes", 5000),
        ] {
            std::fs::write(dir.join(f), file(name, nodes)).expect("write");
        }
        std::fs::write(dir.join("notes.txt"), "not a workload").expect("write");
        let names = |filter| -> Vec<String> {
            discover(&dir, filter)
                .expect("discover")
                .into_iter()
                .map(|w| w.workload.name)
                .collect()
        };
        assert_eq!(names(None), ["A/5000Nodes", "B/500Nodes", "B/5000Nodes"]);
        assert_eq!(names(Some("/500Nodes")), ["B/500Nodes"]);
        std::fs::write(dir.join("C.yaml"), file("A/5000Nodes", 1)).expect("write");
        let dup = discover(&dir, None).expect_err("duplicate name");
        assert!(dup.to_string().contains("defined twice"), "{dup}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
