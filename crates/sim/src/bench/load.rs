//! The load benchmark's measuring side: `kubesched simulate` on one dump file, the way a
//! user runs it, with each phase timed: reading and parsing the file, building the
//! in-memory cluster and the scheduler's cache, scheduling the pending pods, and the
//! report. Run one dump per process (the binary does) so the peak RSS is that dump's.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{BenchError, peak_rss_bytes, process_cpu_seconds};
use crate::load::load_paths;
use crate::runner::{SimError, Simulation, SimulationOptions};

/// The result of simulating one dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadResult {
    /// `LoadDump/5000Nodes/documents`.
    pub workload: String,
    /// Size of the dump file.
    pub file_bytes: u64,
    /// Nodes loaded.
    pub nodes: usize,
    /// Pods loaded (bound and pending).
    pub pods: usize,
    /// Pending pods the scheduler was given.
    pub pending: usize,
    /// Of those, bound at the end.
    pub scheduled: usize,
    /// Problems the loader reported (a generated dump has none).
    pub problems: usize,
    /// Reading and parsing the file into objects.
    pub parse_seconds: f64,
    /// Building the in-memory cluster, the scheduler and its cache from the objects.
    pub build_seconds: f64,
    /// Scheduling the pending pods until the queue is empty.
    pub schedule_seconds: f64,
    /// Building and writing the report table.
    pub report_seconds: f64,
    /// All of it, as `kubesched simulate` takes it.
    pub total_seconds: f64,
    /// CPU time of the whole run (all threads).
    #[serde(default)]
    pub cpu_seconds: Option<f64>,
    /// Peak resident set size of the process (`VmHWM`).
    pub peak_rss_bytes: Option<u64>,
    /// The peak once the file was parsed into objects (what loading costs).
    #[serde(default)]
    pub peak_rss_after_parse_bytes: Option<u64>,
    /// The peak once the cluster, the scheduler and its cache were built.
    #[serde(default)]
    pub peak_rss_after_build_bytes: Option<u64>,
    /// Pods of the in-memory cluster still held packed at the end (report written): a
    /// dump's pods are decoded only while something needs the whole object.
    pub packed_pods_at_end: usize,
}

/// Simulates the dump at `path` with the default profile and measures each phase.
pub fn run_load(path: &Path, workload: &str) -> Result<LoadResult, BenchError> {
    let file_bytes = std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| BenchError::Run(SimError::Build(format!("{}: {e}", path.display()))))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| {
            BenchError::Run(SimError::Build(format!("starting the async runtime: {e}")))
        })?;
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let (manifests, problems) = load_paths(&[path.to_path_buf()]);
    let parse_seconds = started.elapsed().as_secs_f64();
    let peak_rss_after_parse_bytes = peak_rss_bytes();
    let problem_count = problems.len();
    let nodes = manifests.nodes.len();
    let pods = manifests.pods.len();
    let loaded = kubesched_config::default_config();
    runtime.block_on(async {
        let built = Instant::now();
        let mut sim = Simulation::new(
            &loaded,
            SimulationOptions {
                seed: Some(0),
                explain: None,
                progress: None,
            },
        )?;
        sim.add_problems(problems);
        sim.load(manifests, &path.display().to_string());
        let build_seconds = built.elapsed().as_secs_f64();
        let peak_rss_after_build_bytes = peak_rss_bytes();
        let scheduling = Instant::now();
        sim.settle().await;
        let schedule_seconds = scheduling.elapsed().as_secs_f64();
        let reporting = Instant::now();
        let report = sim.report();
        let table = report.to_table(false);
        let report_seconds = reporting.elapsed().as_secs_f64();
        std::hint::black_box(table);
        let total_seconds = started.elapsed().as_secs_f64();
        let packed_pods_at_end = sim
            .cluster()
            .pods()
            .iter()
            .filter(|p| p.is_packed())
            .count();
        Ok(LoadResult {
            workload: workload.to_string(),
            file_bytes,
            nodes,
            pods,
            pending: report.summary.pods,
            scheduled: report.summary.scheduled,
            problems: problem_count,
            parse_seconds,
            build_seconds,
            schedule_seconds,
            report_seconds,
            total_seconds,
            cpu_seconds: cpu_before
                .zip(process_cpu_seconds())
                .map(|(before, after)| (after - before).max(0.0)),
            peak_rss_bytes: peak_rss_bytes(),
            peak_rss_after_parse_bytes,
            peak_rss_after_build_bytes,
            packed_pods_at_end,
        })
    })
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "-".into(),
        |b| format!("{:.0}", b as f64 / (1024.0 * 1024.0)),
    )
}

/// Results as a Markdown table.
pub fn load_markdown(results: &[LoadResult]) -> String {
    let mut out = String::from(
        "| Dump | File MB | Nodes | Pods | Pending | Scheduled | Parse s | Build s | Schedule s | Report s | Total s | CPU s | Peak RSS MiB: parsed | built | end |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        out.push_str(&format!(
            "| {} | {:.0} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |\n",
            r.workload,
            r.file_bytes as f64 / 1e6,
            r.nodes,
            r.pods,
            r.pending,
            r.scheduled,
            r.parse_seconds,
            r.build_seconds,
            r.schedule_seconds,
            r.report_seconds,
            r.total_seconds,
            r.cpu_seconds
                .map_or_else(|| "-".into(), |s| format!("{s:.1}")),
            mib(r.peak_rss_after_parse_bytes),
            mib(r.peak_rss_after_build_bytes),
            mib(r.peak_rss_bytes),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::dump::{DumpShape, DumpSpec, write_dump};
    use super::*;

    #[test]
    fn a_small_dump_of_each_shape_is_loaded_whole() {
        let dir = std::env::temp_dir().join(format!("kubesched-load-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = DumpSpec {
            nodes: 20,
            pods: 400,
            bound_percent: 90,
        };
        for shape in DumpShape::ALL {
            let path = dir.join(format!("dump.{}", shape.extension()));
            let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            write_dump(&spec, shape, &mut file).unwrap();
            drop(file);
            let r = run_load(&path, shape.name()).unwrap();
            assert_eq!((r.nodes, r.pods, r.problems), (20, 400, 0), "{r:?}");
            // No plugin is linked into this crate's tests, so nothing binds here
            // (tests/tests/sim/load_bench.rs schedules them).
            assert_eq!(r.pending, 40, "{r:?}");
            assert!(r.total_seconds >= r.parse_seconds + r.schedule_seconds);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(load_markdown(&[]).starts_with("| Dump |"));
    }
}
