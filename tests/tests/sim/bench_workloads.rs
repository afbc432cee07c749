//! The benchmark workloads under benchmarks/: every file parses, the suite is complete and
//! consistent, and each workload runs end to end when scaled down to a handful of nodes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kubesched_sim::bench::{self, BenchOptions, BenchWorkload};

// Links every in-tree plugin, as the binary has them.
use kubesched_tests as _;

const FAMILIES: [&str; 17] = [
    "GangScheduling",
    "GangSchedulingLargeGroups",
    "MixedSchedulingBasePod",
    "PreemptionBasic",
    "PreferredTopologySpreading",
    "SchedulingBasic",
    "SchedulingCSIPVs",
    "SchedulingInTreePVs",
    "SchedulingMigratedInTreePVs",
    "SchedulingNodeAffinity",
    "SchedulingPodAffinity",
    "SchedulingPodAntiAffinity",
    "SchedulingSecrets",
    "SchedulingWithResourceClaimTemplateStructured",
    "TopologyAwareScheduling",
    "TopologySpreading",
    "Unschedulable",
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../benchmarks")
}

fn all() -> Vec<BenchWorkload> {
    bench::discover(&dir(), None).unwrap_or_else(|e| panic!("{e}"))
}

/// The families also run at 15,000 and 50,000 nodes (issue 17's scale curve).
const SCALE_FAMILIES: [&str; 2] = ["SchedulingBasic", "TopologySpreading"];

#[test]
fn every_family_has_a_500_and_a_5000_node_workload() {
    let mut sizes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for w in all() {
        let nodes = w.node_count();
        assert_eq!(
            w.workload.name,
            format!("{}/{nodes}Nodes", w.family()),
            "{}: the name says how many nodes the workload creates",
            w.path.display()
        );
        let file = w.path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        assert_eq!(file, format!("{}-{nodes}Nodes.yaml", w.family()));
        sizes.entry(w.family().to_string()).or_default().push(nodes);
    }
    let expected: BTreeMap<String, Vec<usize>> = FAMILIES
        .iter()
        .map(|f| {
            let sizes = if SCALE_FAMILIES.contains(f) {
                vec![500, 5000, 15000, 50000]
            } else {
                vec![500, 5000]
            };
            (f.to_string(), sizes)
        })
        .collect();
    assert_eq!(sizes, expected);
}

/// The workload as plain data with every count blanked out.
fn shape(w: &BenchWorkload) -> serde_json::Value {
    fn blank(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if matches!(k.as_str(), "count" | "scheduled" | "unschedulable" | "size") {
                        *v = serde_json::Value::Null;
                    } else {
                        blank(v);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(blank),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(&w.path).unwrap_or_else(|e| panic!("{e}"));
    let mut v: serde_json::Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    v["name"] = serde_json::Value::Null;
    blank(&mut v["ops"]);
    v
}

#[test]
fn the_sizes_of_a_workload_differ_only_in_counts() {
    let workloads = all();
    for family in FAMILIES {
        let sizes: Vec<&BenchWorkload> =
            workloads.iter().filter(|w| w.family() == family).collect();
        assert!(sizes.len() >= 2, "{family}");
        for other in &sizes[1..] {
            assert_eq!(
                shape(sizes[0]),
                shape(other),
                "{family}: {}",
                other.workload.name
            );
        }
    }
}

#[test]
fn every_workload_measures_pods_and_checks_its_outcome() {
    for w in all() {
        let measured: usize = w
            .workload
            .ops
            .iter()
            .map(|op| match op {
                kubesched_sim::Op::CreatePods(c) if c.measure => c.count,
                _ => 0,
            })
            .sum();
        assert!(
            measured >= 400,
            "{}: {measured} measured pods",
            w.workload.name
        );
        assert!(
            matches!(w.workload.ops.last(), Some(kubesched_sim::Op::Expect(_))),
            "{}: ends with an expect op",
            w.workload.name
        );
    }
}

#[test]
fn every_workload_runs_scaled_down_to_five_nodes() {
    for w in all() {
        let scale = 5.0 / w.node_count() as f64;
        let r = bench::run_workload_blocking(&w.workload, BenchOptions { seed: 1, scale })
            .unwrap_or_else(|e| panic!("{}: {e}", w.workload.name));
        assert_eq!(r.workload, w.workload.name);
        assert_eq!(r.nodes, 5, "{}", r.workload);
        assert!(r.measured_pods > 0, "{}", r.workload);
        assert!(r.attempts >= r.measured_pods as u64, "{}", r.workload);
        // Every measured pod went through at least one Filter pass over some node.
        assert!(
            r.nodes_examined >= r.measured_pods as u64,
            "{}: {} nodes examined",
            r.workload,
            r.nodes_examined
        );
        assert!(r.nodes_examined_per_second > 0.0, "{}", r.workload);
        assert!(r.pods_per_second > 0.0, "{}", r.workload);
        assert!(r.latency_ms.p50 <= r.latency_ms.p99, "{}", r.workload);
        if cfg!(target_os = "linux") {
            assert!(r.peak_rss_bytes.is_some_and(|b| b > 0), "{}", r.workload);
        }
    }
}

#[test]
fn the_breakdown_names_the_default_plugins_that_ran() {
    let w = all()
        .into_iter()
        .find(|w| w.workload.name == "SchedulingBasic/500Nodes")
        .unwrap_or_else(|| panic!("SchedulingBasic/500Nodes is missing"));
    // Plugin durations are sampled, so use enough pods that some attempts are recorded.
    let r = bench::run_workload_blocking(
        &w.workload,
        BenchOptions {
            seed: 1,
            scale: 0.2,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let seen: Vec<(&str, &str)> = r
        .breakdown
        .iter()
        .map(|p| (p.plugin.as_str(), p.extension_point.as_str()))
        .collect();
    for expected in [("NodeResourcesFit", "Filter"), ("TaintToleration", "Score")] {
        assert!(seen.contains(&expected), "{expected:?} not in {seen:?}");
    }
}
