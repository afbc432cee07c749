//! The result of a simulation and its renderings (table, JSON, YAML).
//!
//! The JSON/YAML shape is stable: `pods: [{namespace, name, node, status, message,
//! attempts}]`, `summary: {pods, scheduled, unschedulable, pending, attempts, nodes,
//! duration_seconds, pods_per_second, latency_ms_p50, latency_ms_p99}`, `explanations`,
//! `problems: [{file, object, field, message}]`. Only the timing fields of the summary
//! depend on the machine; everything else is reproducible with a seed.

use std::fmt::Write as _;
use std::time::Duration;

use kubesched_scheduler::Explanation;
use serde::Serialize;

use crate::load::InputProblem;

/// Where a pod ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PodState {
    /// Bound to a node.
    Scheduled,
    /// Its last attempt failed.
    Unschedulable,
    /// Never attempted (gated, or waiting).
    Pending,
}

impl PodState {
    fn as_str(&self) -> &'static str {
        match self {
            Self::Scheduled => "Scheduled",
            Self::Unschedulable => "Unschedulable",
            Self::Pending => "Pending",
        }
    }
}

/// One pod's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodResult {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node, or null.
    pub node: Option<String>,
    /// Scheduled, Unschedulable or Pending.
    pub status: PodState,
    /// The FailedScheduling message (or why it is pending).
    pub message: Option<String>,
    /// Scheduling attempts.
    pub attempts: u32,
}

/// Totals of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Pods this scheduler was responsible for.
    pub pods: usize,
    /// Bound.
    pub scheduled: usize,
    /// Last attempt failed.
    pub unschedulable: usize,
    /// Never attempted.
    pub pending: usize,
    /// Scheduling attempts.
    pub attempts: u64,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Wall time of the run.
    pub duration_seconds: f64,
    /// Scheduled pods per second of wall time.
    pub pods_per_second: f64,
    /// Median attempt latency.
    pub latency_ms_p50: f64,
    /// 99th percentile attempt latency.
    pub latency_ms_p99: f64,
}

/// Everything a simulation found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    /// Every pod, in input order.
    pub pods: Vec<PodResult>,
    /// Totals.
    pub summary: Summary,
    /// Explanations asked for with `--explain`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explanations: Vec<Explanation>,
    /// Problems with the input (the rest was simulated).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<InputProblem>,
}

/// The `p`th percentile of sorted durations, in milliseconds.
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

impl SimReport {
    /// JSON, pretty-printed.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// YAML.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).unwrap_or_else(|e| format!("error: {e}\n"))
    }

    /// A table for people: pods, then explanations, problems and the summary.
    pub fn to_table(&self, with_timing: bool) -> String {
        let mut out = String::new();
        let pod_w = self
            .pods
            .iter()
            .map(|p| p.namespace.len() + p.name.len() + 1)
            .max()
            .unwrap_or(3)
            .max(3);
        let node_w = self
            .pods
            .iter()
            .map(|p| p.node.as_deref().unwrap_or("-").len())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(
            out,
            "{:<pod_w$}  {:<13}  {:<node_w$}  MESSAGE",
            "POD", "STATUS", "NODE"
        );
        for p in &self.pods {
            let _ = writeln!(
                out,
                "{:<pod_w$}  {:<13}  {:<node_w$}  {}",
                format!("{}/{}", p.namespace, p.name),
                p.status.as_str(),
                p.node.as_deref().unwrap_or("-"),
                p.message.as_deref().unwrap_or("")
            );
        }
        for e in &self.explanations {
            let _ = writeln!(out, "\nExplanation for {} (profile {}):", e.pod, e.profile);
            for n in &e.nodes {
                if n.feasible {
                    match n.total_score {
                        Some(t) => {
                            let _ = writeln!(out, "  {}: feasible, total score {t}", n.node);
                        }
                        None => {
                            let _ = writeln!(out, "  {}: feasible", n.node);
                        }
                    }
                    for s in &n.scores {
                        let _ = writeln!(
                            out,
                            "    {:<34} raw {:>4}  normalized {:>3}  x weight {:>2} = {:>4}",
                            s.plugin, s.raw, s.normalized, s.weight, s.weighted
                        );
                    }
                } else {
                    let _ = writeln!(
                        out,
                        "  {}: rejected by {}: {}",
                        n.node,
                        n.rejected_by.as_deref().unwrap_or("?"),
                        n.reasons.join(", ")
                    );
                }
                for x in &n.extenders {
                    let _ = writeln!(out, "    {}", extender_line(x));
                }
            }
        }
        if !self.problems.is_empty() {
            let _ = writeln!(out, "\nInput problems (these objects were left out):");
            for p in &self.problems {
                let _ = writeln!(out, "  {p}");
            }
        }
        let s = &self.summary;
        let _ = write!(
            out,
            "\nSummary: {} pods on {} nodes: {} scheduled, {} unschedulable, {} pending; {} attempts",
            s.pods, s.nodes, s.scheduled, s.unschedulable, s.pending, s.attempts
        );
        if with_timing {
            let _ = write!(
                out,
                "; {:.0} pods/s, latency p50 {:.3} ms, p99 {:.3} ms",
                s.pods_per_second, s.latency_ms_p50, s.latency_ms_p99
            );
        }
        out.push('\n');
        out
    }
}

/// One extender's verdict and score on a node, for the table.
fn extender_line(x: &kubesched_scheduler::ExtenderExplanation) -> String {
    let mut parts = Vec::new();
    if let Some(f) = &x.filter {
        parts.push(match &x.reason {
            Some(r) => format!("{f}: {r}"),
            None => f.clone(),
        });
    }
    if let (Some(score), Some(weight), Some(weighted)) = (x.score, x.weight, x.weighted) {
        parts.push(format!("score {score} x weight {weight} x 10 = {weighted}"));
    }
    if let Some(e) = &x.score_error {
        parts.push(format!("prioritize failed: {e}"));
    }
    format!("extender {}: {}", x.extender, parts.join(", "))
}
