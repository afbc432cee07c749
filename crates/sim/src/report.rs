//! The result of a simulation and its renderings (table, JSON, YAML).
//!
//! The JSON/YAML shape is stable (docs/report.schema.json describes it): `apiVersion:
//! kubesched.io/v1alpha1`, `kind: SimulationReport`, `pods:
//! [{namespace, name, node, status, message, attempts, nominated_node, victims,
//! preempted_by, history: [{attempt, result, node, nominated_node, message}]}]`, `summary:
//! {pods, scheduled, unschedulable, pending, invalid (when any), preempted, attempts, nodes, duration_seconds,
//! pods_per_second, latency_ms_p50, latency_ms_p99}`, `events: [{reason, type, action,
//! regarding: {namespace, name}, related, note}]`, `explanations`, `problems: [{file,
//! document, object, field, message}]`, and `what_if` for `--add-nodes`, `--drain` and
//! `--scale-workload`. Only the timing fields of the summary depend on the machine
//! ([`SimReport::drop_timing`] leaves them out); everything else is reproducible with a seed.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::PreemptionExplanation;
use kubesched_scheduler::Explanation;
use serde::Serialize;

use crate::load::InputProblem;
pub use crate::outcomes::PodState;
use crate::outcomes::WhatIf;

/// How one scheduling attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AttemptResult {
    /// Bound to a node.
    Scheduled,
    /// No node fits (or a plugin rejected the chosen one).
    Unschedulable,
    /// An internal error.
    Error,
}

impl AttemptResult {
    fn as_str(&self) -> &'static str {
        match self {
            Self::Scheduled => "Scheduled",
            Self::Unschedulable => "Unschedulable",
            Self::Error => "Error",
        }
    }
}

/// One scheduling attempt of a pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub attempt: u32,
    /// How it ended.
    pub result: AttemptResult,
    /// The node it was bound to, or null.
    pub node: Option<String>,
    /// The node it was nominated to after this attempt, or null.
    pub nominated_node: Option<String>,
    /// The event's message: FailedScheduling's for a failure, Scheduled's otherwise.
    /// Shared between consecutive attempts that failed the same way.
    pub message: Arc<str>,
}

/// One pod's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodResult {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node, or null (for a preempted pod: the node it was evicted from).
    pub node: Option<String>,
    /// Scheduled, Unschedulable, Pending, Preempted, Terminating or Invalid.
    pub status: PodState,
    /// The last FailedScheduling message (or why it is pending, or the Preempted event's).
    pub message: Option<String>,
    /// Scheduling attempts.
    pub attempts: u32,
    /// `status.nominatedNodeName`: where preemption made room for it, or null. A bound
    /// pod (binding clears the field) shows the last nomination it had before binding.
    pub nominated_node: Option<String>,
    /// `namespace/name` of each pod preempted on its behalf, in eviction order.
    pub victims: Vec<String>,
    /// For a preempted pod, the `namespace/name` of the pod it made room for; else null.
    pub preempted_by: Option<String>,
    /// Every scheduling attempt, oldest first.
    pub history: Vec<Attempt>,
}

impl PodResult {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// How [`SimReport::to_table_with`] lays the table out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// The summary's pods/s and latencies (left out for byte-stable output).
    pub with_timing: bool,
    /// kubectl's `-o wide`: the NOMINATED column always, and each pod's attempts.
    pub wide: bool,
    /// Header rows (kubectl's `--no-headers` turns them off).
    pub headers: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            with_timing: true,
            wide: false,
            headers: true,
        }
    }
}

/// Totals of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Pods this scheduler was responsible for.
    pub pods: usize,
    /// Bound.
    pub scheduled: usize,
    /// Last attempt failed.
    pub unschedulable: usize,
    /// Never attempted.
    pub pending: usize,
    /// Refused as an API server would refuse them (left out of the output when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub invalid: usize,
    /// Last attempt failed with an error, not a verdict (left out of the output when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub errors: usize,
    /// Pods evicted by preemption (running pods of the input included).
    pub preempted: usize,
    /// Scheduling attempts.
    pub attempts: u64,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Wall time of the run (this and the other timings are `None`, and left out of the
    /// output, once [`SimReport::drop_timing`] took them out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// Scheduled pods per second of wall time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods_per_second: Option<f64>,
    /// Median attempt latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms_p50: Option<f64>,
    /// 99th percentile attempt latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms_p99: Option<f64>,
}

/// The `apiVersion` of the JSON/YAML report (docs/report.schema.json). A field added keeps
/// it; a field removed or changed in meaning would move it on.
pub const REPORT_API_VERSION: &str = "kubesched.io/v1alpha1";

/// The `kind` of the JSON/YAML report.
pub const REPORT_KIND: &str = "SimulationReport";

/// `apiVersion` and `kind` at the top of a report, so that a stored report says what it
/// is. Always [`REPORT_API_VERSION`] and [`REPORT_KIND`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReportType {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
}

impl Default for ReportType {
    fn default() -> Self {
        Self {
            api_version: REPORT_API_VERSION,
            kind: REPORT_KIND,
        }
    }
}

/// The object an event is about, as events.k8s.io/v1 names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// An event the scheduler wrote, shaped like an events.k8s.io/v1 Event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportEvent {
    /// `Scheduled`, `FailedScheduling` or `Preempted`.
    pub reason: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// `Binding`, `Scheduling` or `Preempting`.
    pub action: String,
    /// The pod it is about.
    pub regarding: EventRef,
    /// The other pod involved: the preemptor of a `Preempted` event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<EventRef>,
    /// The message.
    pub note: String,
}

/// Everything a simulation found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SimReport {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub type_meta: ReportType,
    /// Pods this scheduler was responsible for, in input order, then running pods of the
    /// input that were preempted, in eviction order.
    pub pods: Vec<PodResult>,
    /// Totals.
    pub summary: Summary,
    /// The events the scheduler wrote, oldest first.
    pub events: Vec<ReportEvent>,
    /// Explanations asked for with `--explain`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explanations: Vec<Explanation>,
    /// The pod groups (GenericWorkload) the scheduler tried, as their last group cycle
    /// left them, by `namespace/name`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pod_groups: Vec<PodGroupResult>,
    /// Problems with the input (the rest was simulated).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<InputProblem>,
    /// The answer to `--add-nodes`, `--drain` or `--scale-workload`, for the run shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIf>,
}

/// One pod group (GenericWorkload's `scheduling.k8s.io/v1beta1` PodGroup) after its last
/// pod-group cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodGroupResult {
    /// The namespace.
    pub namespace: String,
    /// The PodGroup's name.
    pub name: String,
    /// The pods that must be scheduled together (`gang.minCount`; 1 for `basic`).
    pub min_count: usize,
    /// The members the last cycle tried, in the order tried.
    pub members: Vec<String>,
    /// Members bound at the end of the run (the last cycle's and earlier ones).
    pub scheduled: usize,
    /// Whether the last cycle placed the group.
    pub placed: bool,
    /// Why the last cycle could not place it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Group cycles run.
    pub cycles: u32,
    /// With TopologyAwareWorkloadScheduling: the placement the last cycle chose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// With TopologyAwareWorkloadScheduling: the placements the last cycle tried, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<PlacementResult>,
}

/// One placement a pod group's last cycle tried (TopologyAwareWorkloadScheduling).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlacementResult {
    /// Its name (TopologyPlacement: the topology domain).
    pub name: String,
    /// Its nodes.
    pub nodes: usize,
    /// Whether the group fit in it.
    pub feasible: bool,
    /// Its weighted PlacementScore total, when several placements were feasible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl SimReport {
    /// Leaves the wall-clock timings out of the summary, so that two runs of the same
    /// input render the same bytes (`--no-timing`).
    pub fn drop_timing(&mut self) {
        let s = &mut self.summary;
        s.duration_seconds = None;
        s.pods_per_second = None;
        s.latency_ms_p50 = None;
        s.latency_ms_p99 = None;
    }

    /// JSON, pretty-printed.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// YAML.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).unwrap_or_else(|e| format!("error: {e}\n"))
    }

    /// A table for people: pods (with every attempt of the pods tried more than once),
    /// preempted pods, explanations, problems and the summary.
    pub fn to_table(&self, with_timing: bool) -> String {
        self.to_table_with(TableOptions {
            with_timing,
            ..TableOptions::default()
        })
    }

    /// `kubectl get -o name`: one `pod/NAME` line per pod, nothing else.
    pub fn to_names(&self) -> String {
        let mut out = String::new();
        for p in &self.pods {
            let _ = writeln!(out, "pod/{}", shown(&p.name));
        }
        out
    }

    /// Keeps the pods (and their explanations) of `namespace` whose state is one of
    /// `states`, as kubectl's `-n` and a status filter narrow what it lists; `None` and an
    /// empty list keep everything. The summary still describes the whole run.
    pub fn retain_pods(&mut self, namespace: Option<&str>, states: &[PodState]) {
        self.pods.retain(|p| {
            namespace.is_none_or(|ns| p.namespace == ns)
                && (states.is_empty() || states.contains(&p.status))
        });
        if let Some(ns) = namespace {
            let prefix = format!("{ns}/");
            self.explanations.retain(|e| e.pod.starts_with(&prefix));
        }
    }

    /// [`SimReport::to_table`] with kubectl's `-o wide` and `--no-headers` choices.
    pub fn to_table_with(&self, options: TableOptions) -> String {
        let TableOptions {
            with_timing,
            wide,
            headers,
        } = options;
        let mut out = String::new();
        self.write_pods(&mut out, wide, headers);
        self.write_pod_groups(&mut out);
        self.write_preempted(&mut out, headers);
        if let Some(w) = &self.what_if {
            write_what_if(&mut out, w);
        }
        for e in &self.explanations {
            write_explanation(&mut out, e);
        }
        if !self.problems.is_empty() {
            let _ = writeln!(
                out,
                "\nInput problems (what could not be read or an API server would refuse was left out):"
            );
            for p in &self.problems {
                let _ = writeln!(out, "  {}", shown(&p.to_string()));
            }
        }
        let s = &self.summary;
        let _ = write!(
            out,
            "\nSummary: {} on {}: {} scheduled, {} unschedulable, {} pending",
            plural(s.pods, "pod", "pods"),
            plural(s.nodes, "node", "nodes"),
            s.scheduled,
            s.unschedulable,
            s.pending
        );
        if s.invalid > 0 {
            let _ = write!(out, ", {} invalid", s.invalid);
        }
        if s.errors > 0 {
            let _ = write!(out, ", {}", plural(s.errors, "error", "errors"));
        }
        if s.preempted > 0 {
            let _ = write!(out, ", {} preempted", s.preempted);
        }
        let _ = write!(
            out,
            "; {}",
            plural(s.attempts as usize, "attempt", "attempts")
        );
        if with_timing
            && let (Some(rate), Some(p50), Some(p99)) =
                (s.pods_per_second, s.latency_ms_p50, s.latency_ms_p99)
        {
            let _ = write!(
                out,
                "; {rate:.0} pods/s, latency p50 {p50:.3} ms, p99 {p99:.3} ms"
            );
        }
        out.push('\n');
        out
    }

    fn write_pods(&self, out: &mut String, wide: bool, headers: bool) {
        let rows: Vec<[Cow<'_, str>; 4]> = self
            .pods
            .iter()
            .map(|p| {
                [
                    Cow::Owned(shown(&p.key()).into_owned()),
                    shown(p.node.as_deref().unwrap_or("-")),
                    shown(p.nominated_node.as_deref().unwrap_or("-")),
                    shown(p.message.as_deref().unwrap_or("")),
                ]
            })
            .collect();
        let width = |column: usize, least: usize| {
            rows.iter()
                .map(|r| r[column].chars().count())
                .max()
                .unwrap_or(least)
                .max(least)
        };
        let pod_w = width(0, 3);
        let node_w = width(1, 4);
        // The NOMINATED column appears only when preemption nominated someone (always in
        // the wide table), so tables of runs without preemption keep their shape.
        let nominated_w =
            (wide || self.pods.iter().any(|p| p.nominated_node.is_some())).then(|| {
                self.pods
                    .iter()
                    .zip(&rows)
                    .filter(|(p, _)| p.nominated_node.is_some())
                    .map(|(_, r)| r[2].chars().count())
                    .max()
                    .unwrap_or(0)
                    .max("NOMINATED".len())
            });
        let line = |out: &mut String,
                    pod: &str,
                    status: &str,
                    node: &str,
                    nominated: &str,
                    attempts: &str,
                    message: &str| {
            pad(out, pod, pod_w);
            out.push_str("  ");
            pad(out, status, 13);
            out.push_str("  ");
            pad(out, node, node_w);
            out.push_str("  ");
            if let Some(w) = nominated_w {
                pad(out, nominated, w);
                out.push_str("  ");
            }
            if wide {
                pad(out, attempts, "ATTEMPTS".len());
                out.push_str("  ");
            }
            out.push_str(message);
            out.push('\n');
        };
        if headers {
            line(
                out,
                "POD",
                "STATUS",
                "NODE",
                "NOMINATED",
                "ATTEMPTS",
                "MESSAGE",
            );
        }
        for (p, row) in self.pods.iter().zip(&rows) {
            let attempts = p.attempts.to_string();
            line(
                out,
                &row[0],
                p.status.as_str(),
                &row[1],
                &row[2],
                &attempts,
                &row[3],
            );
            if p.history.len() > 1 {
                // Attempts that ended alike (an extender down fails them all the same way)
                // are one line with their range; JSON and YAML keep every attempt.
                let alike = |a: &Attempt, b: &Attempt| {
                    a.result == b.result
                        && a.nominated_node == b.nominated_node
                        && a.message == b.message
                };
                let mut i = 0;
                while i < p.history.len() {
                    let first = &p.history[i];
                    let mut j = i + 1;
                    while j < p.history.len() && alike(first, &p.history[j]) {
                        j += 1;
                    }
                    let last = &p.history[j - 1];
                    let mut line = if j - i > 1 {
                        format!(
                            "  attempts {}-{} ({} alike): {}",
                            first.attempt,
                            last.attempt,
                            j - i,
                            first.result.as_str()
                        )
                    } else {
                        format!("  attempt {}: {}", first.attempt, first.result.as_str())
                    };
                    if let Some(n) = &first.nominated_node {
                        let _ = write!(line, ", nominated to {}", shown(n));
                    }
                    let _ = writeln!(out, "{line}: {}", shown(&first.message));
                    i = j;
                }
            }
        }
    }

    /// One line per pod group: minimum, members bound, and why the last cycle failed.
    fn write_pod_groups(&self, out: &mut String) {
        if self.pod_groups.is_empty() {
            return;
        }
        let _ = writeln!(out, "\nPod groups:");
        for g in &self.pod_groups {
            let key = shown(&format!("{}/{}", g.namespace, g.name)).into_owned();
            let state = if g.placed {
                match &g.placement {
                    Some(p) => format!("placed in {}", shown(p)),
                    None => "placed".to_string(),
                }
            } else {
                format!(
                    "not placed: {}",
                    shown(g.message.as_deref().unwrap_or_default())
                )
            };
            let _ = writeln!(
                out,
                "  {key}: minCount {}, {} of {} scheduled, {state} (members tried: {})",
                g.min_count,
                g.scheduled,
                g.members.len(),
                g.members
                    .iter()
                    .map(|m| shown(m).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    fn write_preempted(&self, out: &mut String, headers: bool) {
        let rows: Vec<(String, Cow<'_, str>, Cow<'_, str>)> = self
            .pods
            .iter()
            .filter(|p| matches!(p.status, PodState::Preempted | PodState::Terminating))
            .map(|p| {
                (
                    shown(&p.key()).into_owned(),
                    shown(p.node.as_deref().unwrap_or("-")),
                    shown(p.preempted_by.as_deref().unwrap_or("-")),
                )
            })
            .collect();
        if rows.is_empty() {
            return;
        }
        let victim_w = rows
            .iter()
            .map(|r| r.0.chars().count())
            .max()
            .unwrap_or(0)
            .max(6);
        let node_w = rows
            .iter()
            .map(|r| r.1.chars().count())
            .max()
            .unwrap_or(0)
            .max(4);
        let _ = writeln!(out, "\nPreempted:");
        let line = |out: &mut String, victim: &str, node: &str, preemptor: &str| {
            out.push_str("  ");
            pad(out, victim, victim_w);
            out.push_str("  ");
            pad(out, node, node_w);
            out.push_str("  ");
            out.push_str(preemptor);
            out.push('\n');
        };
        if headers {
            line(out, "VICTIM", "NODE", "PREEMPTOR");
        }
        for (victim, node, preemptor) in &rows {
            line(out, victim, node, preemptor);
        }
    }
}

/// Text from the input as a table shows it: control characters (and the invisible
/// characters that reorder text) escaped, so a name can neither break a row nor fake one.
/// `\n`, `\r` and `\t` read as themselves; others as `\u{..}`.
pub fn shown(text: &str) -> Cow<'_, str> {
    fn hidden(c: char) -> bool {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    }
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` then spaces up to `width` characters (any width: no formatter limit).
fn pad(out: &mut String, text: &str, width: usize) {
    out.push_str(text);
    let n = text.chars().count();
    if n < width {
        out.extend(std::iter::repeat_n(' ', width - n));
    }
}

fn write_explanation(out: &mut String, e: &Explanation) {
    let attempt = e
        .attempt
        .map(|a| format!(", attempt {a}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\nExplanation for {} (profile {}{attempt}):",
        shown(&e.pod),
        e.profile
    );
    for n in &e.nodes {
        if n.feasible {
            match n.total_score {
                Some(t) => {
                    let _ = writeln!(out, "  {}: feasible, total score {t}", shown(&n.node));
                }
                None => {
                    let _ = writeln!(out, "  {}: feasible", shown(&n.node));
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
                shown(&n.node),
                n.rejected_by.as_deref().unwrap_or("?"),
                n.reasons.join(", ")
            );
            for r in &n.remedies {
                let _ = writeln!(out, "    to fit: {} [{}]", r.text, r.plugin);
            }
        }
        for x in &n.extenders {
            let _ = writeln!(out, "    {}", extender_line(x));
        }
    }
    if let Some(p) = &e.preemption {
        write_preemption(out, p);
    }
}

fn write_preemption(out: &mut String, p: &PreemptionExplanation) {
    let _ = writeln!(out, "  Preemption ({}):", p.plugin);
    if let Some(why) = &p.not_eligible {
        let _ = writeln!(out, "    {why}");
        return;
    }
    for c in &p.candidates {
        let verdict = match c.eliminated_by {
            Some(criterion) => format!("lost on {criterion}"),
            None => "chosen".to_string(),
        };
        let _ = writeln!(
            out,
            "    candidate {}: {}, {}, highest priority {}, priority sum {}, earliest start {}; {verdict}",
            c.node,
            plural(c.victims.len(), "victim", "victims"),
            plural(c.pdb_violations, "PDB violation", "PDB violations"),
            c.highest_priority,
            c.priority_sum,
            c.earliest_start_of_highest_priority
                .as_deref()
                .unwrap_or("not started"),
        );
        for v in &c.victims {
            let _ = writeln!(
                out,
                "      victim {} (priority {}, started {}){}",
                v.pod,
                v.priority,
                v.start_time.as_deref().unwrap_or("never"),
                if v.violates_pdb {
                    ", violates a PodDisruptionBudget"
                } else {
                    ""
                }
            );
        }
    }
    for r in &p.rejected {
        let _ = writeln!(
            out,
            "    no candidate on {}: {}",
            r.node,
            r.reasons.join(", ")
        );
    }
    if p.not_helpful > 0 {
        let _ = writeln!(
            out,
            "    {} where preemption cannot help (Filter said so)",
            plural(p.not_helpful, "node", "nodes")
        );
    }
    if p.not_tried > 0 {
        let _ = writeln!(
            out,
            "    {} not tried: enough candidates were found",
            plural(p.not_tried, "node", "nodes")
        );
    }
    match (&p.chosen, p.decided_by) {
        (Some(node), Some(criterion)) => {
            let _ = writeln!(out, "    chosen: {node}, decided by {criterion}");
        }
        (Some(node), None) => {
            let _ = writeln!(out, "    chosen: {node}");
        }
        (None, _) => {
            let _ = writeln!(out, "    no node: preemption cannot make room");
        }
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

fn pod_outcome_line(status: PodState, node: Option<&str>, message: Option<&str>) -> String {
    match (status, node) {
        (PodState::Scheduled, Some(n)) => format!("-> {n}"),
        (s, _) => format!("{}: {}", s.as_str(), message.unwrap_or("")),
    }
}

fn write_what_if(out: &mut String, w: &WhatIf) {
    match w {
        WhatIf::AddNodes(a) => {
            let _ = writeln!(
                out,
                "\nWhat if: add copies of {} (at most {})",
                a.templates.join(" + "),
                a.max
            );
            let tried: Vec<String> = a
                .tried
                .iter()
                .map(|t| {
                    let mut s = format!("{}: {} unschedulable", t.copies, t.unschedulable);
                    if t.preempted > 0 {
                        let _ = write!(s, ", {} preempted", t.preempted);
                    }
                    s
                })
                .collect();
            let _ = writeln!(out, "  tried: {}", tried.join("; "));
            match a.nodes_to_add {
                Some(0) => {
                    let _ = writeln!(
                        out,
                        "  nodes to add: 0 (every pending pod schedules as the cluster is)"
                    );
                }
                Some(n) => {
                    let _ = writeln!(
                        out,
                        "  nodes to add: {n} ({}); the table above is that run",
                        a.added_nodes.join(", ")
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "  nodes to add: more than {} (the table above is the run with {}); still failing:",
                        a.max,
                        plural(a.max, "copy", "copies")
                    );
                    for f in &a.still_failing {
                        let _ = writeln!(
                            out,
                            "    {} {}",
                            f.pod,
                            pod_outcome_line(f.status, f.node.as_deref(), f.message.as_deref())
                        );
                    }
                }
            }
        }
        WhatIf::Drain(d) => {
            let _ = writeln!(out, "\nWhat if: drain {}", d.nodes.join(", "));
            let w = d
                .evicted
                .iter()
                .map(|e| shown(&e.pod).chars().count())
                .max()
                .unwrap_or(0);
            for e in &d.evicted {
                out.push_str("  ");
                pad(out, &shown(&e.pod), w);
                let _ = writeln!(
                    out,
                    "  from {} ({}) {}",
                    shown(&e.from),
                    shown(&e.owner),
                    shown(&pod_outcome_line(
                        e.outcome.status,
                        e.outcome.to.as_deref(),
                        e.outcome.message.as_deref()
                    ))
                );
            }
            for s in &d.not_evicted {
                let _ = writeln!(out, "  {} on {}: not evicted: {}", s.pod, s.node, s.reason);
            }
            for b in &d.budgets {
                let _ = writeln!(
                    out,
                    "  PodDisruptionBudget {} ({} allowed, from {}) covers {}: {}",
                    b.budget,
                    b.disruptions_allowed,
                    b.source,
                    b.pods.join(", "),
                    b.verdict
                );
            }
            let _ = writeln!(
                out,
                "  {}",
                if d.evicted.is_empty() {
                    "nothing to evict"
                } else if d.all_rescheduled {
                    "every evicted pod finds room elsewhere"
                } else {
                    "some evicted pods find no room elsewhere"
                }
            );
        }
        WhatIf::Consolidate(c) => {
            let _ = writeln!(
                out,
                "\nWhat if: consolidate ({} nodes, emptiest first)",
                c.nodes
            );
            for t in &c.tried {
                let verdict = match &t.reason {
                    None => "can be removed".to_string(),
                    Some(why) => format!("stays: {}", shown(why)),
                };
                let _ = writeln!(out, "  {}: {verdict}", shown(&t.node));
            }
            let _ = writeln!(
                out,
                "  {}",
                if c.removable.is_empty() {
                    "no node can be removed".to_string()
                } else {
                    format!(
                        "{} removable together: {}",
                        plural(c.removable.len(), "node", "nodes"),
                        c.removable
                            .iter()
                            .map(|n| shown(n).into_owned())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            );
        }
        WhatIf::Explain(e) => {
            let _ = writeln!(out, "\nDry run of {} (profile {}):", e.pod, e.profile);
            let verdict = match (e.outcome.status, &e.outcome.to) {
                (PodState::Scheduled, Some(n)) => format!("it would go to {n}"),
                (status, _) => format!(
                    "it would be {}: {}",
                    status.as_str(),
                    e.outcome.message.as_deref().unwrap_or("")
                ),
            };
            match (&e.bound_to, e.same_node) {
                (Some(b), Some(true)) => {
                    let _ = writeln!(out, "  runs on {b}; it would go there again");
                }
                (Some(b), _) => {
                    let _ = writeln!(out, "  runs on {b}; not there again: {verdict}");
                }
                (None, _) => {
                    let _ = writeln!(out, "  pending; {verdict}");
                }
            }
        }
        WhatIf::ScaleWorkload(s) => {
            let _ = writeln!(
                out,
                "\nWhat if: scale {} {}/{} from {} to {} replicas",
                s.kind, s.namespace, s.name, s.current, s.replicas
            );
            let w = s
                .added
                .iter()
                .map(|p| shown(&p.pod).chars().count())
                .max()
                .unwrap_or(0);
            for p in &s.added {
                out.push_str("  ");
                pad(out, &shown(&p.pod), w);
                let _ = writeln!(
                    out,
                    "  {}",
                    shown(&pod_outcome_line(
                        p.status,
                        p.node.as_deref(),
                        p.message.as_deref()
                    ))
                );
            }
            if !s.claims.is_empty() {
                let _ = writeln!(out, "  claims created: {}", s.claims.join(", "));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>, status: PodState, message: Option<&str>) -> PodResult {
        PodResult {
            namespace: "default".into(),
            name: name.into(),
            node: node.map(str::to_string),
            status,
            message: message.map(str::to_string),
            attempts: 1,
            nominated_node: None,
            victims: Vec::new(),
            preempted_by: None,
            history: Vec::new(),
        }
    }

    fn report(pods: Vec<PodResult>) -> SimReport {
        SimReport {
            type_meta: ReportType::default(),
            pods,
            summary: Summary {
                pods: 0,
                scheduled: 0,
                unschedulable: 0,
                pending: 0,
                invalid: 0,
                errors: 0,
                preempted: 0,
                attempts: 0,
                nodes: 0,
                duration_seconds: Some(0.0),
                pods_per_second: Some(0.0),
                latency_ms_p50: Some(0.0),
                latency_ms_p99: Some(0.0),
            },
            events: Vec::new(),
            explanations: Vec::new(),
            problems: Vec::new(),
            what_if: None,
            pod_groups: Vec::new(),
        }
    }

    #[test]
    fn documents_say_what_they_are_and_timings_can_be_left_out() {
        let mut r = report(vec![pod("p", Some("n1"), PodState::Scheduled, None)]);
        assert!(
            r.to_json().starts_with(
                "{\n  \"apiVersion\": \"kubesched.io/v1alpha1\",\n  \"kind\": \"SimulationReport\",\n  \"pods\""
            ),
            "{}",
            r.to_json()
        );
        assert!(
            r.to_yaml()
                .starts_with("apiVersion: kubesched.io/v1alpha1\nkind: SimulationReport\npods:"),
            "{}",
            r.to_yaml()
        );
        assert!(r.to_json().contains("duration_seconds"));
        r.drop_timing();
        for text in [r.to_json(), r.to_yaml(), r.to_table(true)] {
            for field in ["duration_seconds", "pods_per_second", "latency", "pods/s"] {
                assert!(!text.contains(field), "{field} in {text}");
            }
        }
    }

    #[test]
    fn names_of_any_length_pad_the_table() {
        // 65,535 characters and more overflowed the formatter's width ("Formatting
        // argument out of range").
        let long = "p".repeat(70_000);
        let node = "n".repeat(70_000);
        let mut preempted = pod(&long, Some(&node), PodState::Preempted, Some("gone"));
        preempted.preempted_by = Some("default/x".into());
        let table = report(vec![
            pod(&long, Some(&node), PodState::Scheduled, None),
            pod("short", None, PodState::Pending, Some("waiting")),
            preempted,
        ])
        .to_table(false);
        let lines: Vec<&str> = table.lines().collect();
        let pod_w = "default/".len() + 70_000;
        assert!(lines[0].starts_with("POD "));
        assert_eq!(lines[0].find("STATUS"), Some(pod_w + 2));
        assert_eq!(lines[2].find("Pending"), Some(pod_w + 2));
        assert!(table.contains(&format!("  VICTIM{}", " ".repeat(pod_w - 6 + 2))));
    }

    #[test]
    fn control_characters_in_names_are_escaped() {
        let sneaky = "a\nfake/row      Scheduled      node-1\t\u{1b}[31m\u{202e}";
        let mut r = report(vec![pod(sneaky, Some("n\r1"), PodState::Scheduled, None)]);
        r.problems.push(InputProblem::object(
            "f.yaml",
            format!("Pod default/{sneaky}"),
            None,
            "bad",
        ));
        let table = r.to_table(false);
        assert_eq!(
            shown(sneaky),
            "a\\nfake/row      Scheduled      node-1\\t\\u{1b}[31m\\u{202e}"
        );
        assert!(table.contains(&*shown(sneaky)), "{table}");
        assert!(table.contains("n\\r1"), "{table}");
        // One header, one row, then the problems and the summary: no line a name made.
        assert_eq!(
            table.lines().filter(|l| l.contains("fake/row")).count(),
            2,
            "{table}"
        );
        assert!(!table.contains('\u{1b}') && !table.contains('\r') && !table.contains('\u{202e}'));
        assert_eq!(shown("plain-name"), Cow::Borrowed("plain-name"));
    }

    fn pods_table(table: &str) -> Vec<&str> {
        table.lines().take_while(|l| !l.is_empty()).collect()
    }

    #[test]
    fn wide_names_and_no_headers_are_kubectls() {
        let mut unschedulable = pod(
            "web-2",
            None,
            PodState::Unschedulable,
            Some("0/2 nodes are available"),
        );
        unschedulable.attempts = 4;
        let r = report(vec![
            pod("web-1", Some("n1"), PodState::Scheduled, None),
            unschedulable,
        ]);

        let plain = r.to_table(false);
        assert_eq!(
            pods_table(&plain),
            [
                "POD            STATUS         NODE  MESSAGE",
                "default/web-1  Scheduled      n1    ",
                "default/web-2  Unschedulable  -     0/2 nodes are available",
            ]
        );
        let wide = r.to_table_with(TableOptions {
            with_timing: false,
            wide: true,
            headers: true,
        });
        assert_eq!(
            pods_table(&wide),
            [
                "POD            STATUS         NODE  NOMINATED  ATTEMPTS  MESSAGE",
                "default/web-1  Scheduled      n1    -          1         ",
                "default/web-2  Unschedulable  -     -          4         0/2 nodes are available",
            ]
        );
        let bare = r.to_table_with(TableOptions {
            with_timing: false,
            wide: false,
            headers: false,
        });
        assert_eq!(
            pods_table(&bare),
            [
                "default/web-1  Scheduled      n1    ",
                "default/web-2  Unschedulable  -     0/2 nodes are available",
            ]
        );
        assert_eq!(r.to_names(), "pod/web-1\npod/web-2\n");
    }

    #[test]
    fn retain_pods_narrows_by_namespace_and_state_and_keeps_the_summary() {
        let mut other = pod("db-0", Some("n2"), PodState::Scheduled, None);
        other.namespace = "data".into();
        let mut r = report(vec![
            pod("web-1", Some("n1"), PodState::Scheduled, None),
            pod("web-2", None, PodState::Unschedulable, Some("no")),
            other,
        ]);
        r.summary.pods = 3;
        let mut by_ns = r.clone();
        by_ns.retain_pods(Some("data"), &[]);
        assert_eq!(
            by_ns.pods.iter().map(PodResult::key).collect::<Vec<_>>(),
            ["data/db-0"]
        );
        assert_eq!(by_ns.summary.pods, 3, "the summary describes the whole run");
        let mut by_state = r.clone();
        by_state.retain_pods(None, &[PodState::Unschedulable, PodState::Pending]);
        assert_eq!(
            by_state.pods.iter().map(PodResult::key).collect::<Vec<_>>(),
            ["default/web-2"]
        );
        let mut both = r.clone();
        both.retain_pods(Some("data"), &[PodState::Unschedulable]);
        assert!(both.pods.is_empty());
        r.retain_pods(None, &[]);
        assert_eq!(r.pods.len(), 3);
    }

    #[test]
    fn attempts_that_ended_alike_are_one_line() {
        let mut p = pod(
            "web",
            None,
            PodState::Error,
            Some("Post \"http://ext/filter\": refused"),
        );
        let attempt = |n: u32, result: AttemptResult, message: &str| Attempt {
            attempt: n,
            result,
            node: None,
            nominated_node: None,
            message: message.into(),
        };
        p.history = vec![
            attempt(1, AttemptResult::Unschedulable, "0/1 nodes are available"),
            attempt(
                2,
                AttemptResult::Error,
                "Post \"http://ext/filter\": refused",
            ),
            attempt(
                3,
                AttemptResult::Error,
                "Post \"http://ext/filter\": refused",
            ),
            attempt(
                4,
                AttemptResult::Error,
                "Post \"http://ext/filter\": refused",
            ),
        ];
        p.attempts = 4;
        let table = report(vec![p]).to_table(false);
        let lines: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("  attempt"))
            .collect();
        assert_eq!(
            lines,
            [
                "  attempt 1: Unschedulable: 0/1 nodes are available",
                "  attempts 2-4 (3 alike): Error: Post \"http://ext/filter\": refused",
            ]
        );
    }
}
