//! The results as Markdown tables or JSON, like `kubesched bench`'s.

use std::fmt::Write as _;

use crate::KubeBenchResult;

/// The results as a JSON list.
pub fn to_json(results: &[KubeBenchResult]) -> String {
    serde_json::to_string_pretty(results).unwrap_or_else(|_| "[]".into())
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// One row per workload, then the scheduler's API requests per scheduled pod.
pub fn to_markdown(results: &[KubeBenchResult]) -> String {
    let mut out = String::from(
        "| Workload | Nodes | Initial pods | Measured pods | Pods/s | Synced s | First bind s | p50 ms | p99 ms | Scheduler CPU-s per 10k pods | Writes per pod |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.0} | {:.2} | {} | {:.1} | {:.1} | {} | {:.2} |",
            r.workload,
            r.nodes,
            r.initial_pods,
            r.measured_pods,
            r.pods_per_second,
            r.synced_seconds,
            opt(r.first_bind_seconds, 2),
            r.latency_ms.p50,
            r.latency_ms.p99,
            opt(r.cpu_seconds_per_10k_pods, 2),
            r.writes_per_pod,
        );
    }
    out.push_str(
        "\nAPI requests of the scheduler's clients during the measured phase:\n\n\
         | Workload | Verb | Resource | Requests | Per measured pod |\n\
         | --- | --- | --- | ---: | ---: |\n",
    );
    for r in results {
        for q in &r.requests {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.3} |",
                r.workload, q.verb, q.resource, q.requests, q.per_pod
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RequestRate;
    use kubesched_sim::bench::LatencyMs;

    fn result() -> KubeBenchResult {
        KubeBenchResult {
            workload: "SchedulingBasic/500Nodes".into(),
            nodes: 500,
            initial_pods: 500,
            measured_pods: 1000,
            pods_per_second: 812.4,
            latency_ms: LatencyMs {
                p50: 12.0,
                p90: 20.0,
                p99: 31.25,
            },
            synced_seconds: 0.25,
            first_bind_seconds: Some(0.3),
            measured_seconds: 1.3,
            scheduler_cpu_seconds: Some(0.5),
            cpu_seconds_per_10k_pods: Some(5.0),
            writes_per_pod: 1.0,
            requests: vec![
                RequestRate {
                    verb: "create".into(),
                    resource: "pods/binding".into(),
                    requests: 1000,
                    per_pod: 1.0,
                },
                RequestRate {
                    verb: "create".into(),
                    resource: "events.k8s.io/events".into(),
                    requests: 1000,
                    per_pod: 1.0,
                },
            ],
            scale: 1.0,
        }
    }

    #[test]
    fn markdown_has_a_row_per_workload_and_per_request_kind() {
        let md = to_markdown(&[result()]);
        assert!(
            md.contains("| SchedulingBasic/500Nodes | 500 | 500 | 1000 | 812 | 0.25 | 0.30 | 12.0 | 31.2 | 5.00 | 1.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| SchedulingBasic/500Nodes | create | pods/binding | 1000 | 1.000 |"),
            "{md}"
        );
    }

    #[test]
    fn json_round_trips() {
        let json = to_json(&[result()]);
        let back: Vec<KubeBenchResult> = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, vec![result()]);
        assert!(!json.contains("\"scale\""), "scale 1 is left out");
    }
}
