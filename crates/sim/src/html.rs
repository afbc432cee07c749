//! `kubesched simulate --report FILE.html`: one self-contained HTML page (inline CSS, inline
//! SVG charts drawn by plotters, no scripts, fonts, images or links outside the file).
//!
//! [`ReportData`] is the model the page is rendered from (what tests snapshot); [`render`]
//! turns it into HTML. It reads a finished [`SimReport`] and the node usage before and after
//! the run; it never schedules anything itself.
//!
//! The page stays small on big runs: past [`MAX_NODE_ROWS`] nodes the utilisation charts show
//! how many nodes fall in each band of use (with the most used nodes in a table), at most
//! [`MAX_POD_ROWS`] pods are listed and at most [`MAX_NOTABLE_SECTIONS`] +
//! [`MAX_SAMPLE_SECTIONS`] pods are explained, and an explanation groups the nodes that were
//! rejected for the same reasons instead of listing every node.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use kubesched_framework::PreemptionExplanation;
use plotters::prelude::*;
use serde::Serialize;

use crate::explained::ExplainedPod;
pub use crate::explained::{
    AttemptSection, ExplainedPods, MAX_HISTORY, RejectedGroup, TOP_FEASIBLE,
};
use crate::report::{Attempt, AttemptResult, PodResult, PodState, SimReport, Summary};
pub use crate::usage::NodeUsage;

/// One resource of one node, before and after, in percent of allocatable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilisationRow {
    /// The node.
    pub node: String,
    /// Percent requested before the run (0 when the node has none allocatable).
    pub before: f64,
    /// Percent requested after the run.
    pub after: f64,
}

/// How many nodes were in one band of use, before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UtilisationBand {
    /// `empty`, `0–10 %`, …, `90–100 %`, `over 100 %`.
    pub band: String,
    /// Nodes in it before the run.
    pub before: usize,
    /// Nodes in it after the run.
    pub after: usize,
}

/// One resource's utilisation chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilisationChart {
    /// `cpu`, `memory` or `pods`.
    pub resource: String,
    /// Nodes shown, most used after the run first: every node when there are at most
    /// [`MAX_NODE_ROWS`], else the [`TOP_NODES`] most used (listed under the bands).
    pub rows: Vec<UtilisationRow>,
    /// Nodes left out of `rows`.
    pub hidden: usize,
    /// Past [`MAX_NODE_ROWS`] nodes: how many nodes are in each band of use (what the chart
    /// draws then); empty when every node has its own bars.
    pub bands: Vec<UtilisationBand>,
}

/// How often a Filter reason rejected a node for the pods left unschedulable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    /// The reason, as Filter gave it.
    pub reason: String,
    /// Unschedulable pods that got it on at least one node (what the chart draws).
    pub pods: usize,
    /// Distinct nodes that gave it to at least one of those pods (at most the cluster's
    /// node count).
    pub nodes: usize,
}

/// The normalised scores one Score plugin gave over every explained feasible node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreDistribution {
    /// The plugin.
    pub plugin: String,
    /// Its weight.
    pub weight: i64,
    /// How many (pod, node) scores.
    pub count: usize,
    /// Minimum, lower quartile, median, upper quartile, maximum (0..=100).
    pub quartiles: [f64; 5],
}

/// One row of the pods table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodRow {
    /// `namespace/name`.
    pub pod: String,
    /// The anchor of its explanation section, when it has one on the page.
    pub anchor: Option<String>,
    /// Where it ended.
    pub status: String,
    /// Its node, if any.
    pub node: Option<String>,
    /// Scheduling attempts.
    pub attempts: u32,
    /// The last message.
    pub message: Option<String>,
}

/// One pod's explanation section: its attempts, what preemption did for it or to it, and
/// the explained attempts that matter (the ones that nominated a node, and the last).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodSection {
    /// The HTML id.
    pub anchor: String,
    /// `namespace/name`.
    pub pod: String,
    /// Where it ended.
    pub status: String,
    /// Its node, if any.
    pub node: Option<String>,
    /// Where preemption made room for it.
    pub nominated_node: Option<String>,
    /// Pods preempted on its behalf.
    pub victims: Vec<String>,
    /// The pod it was preempted for.
    pub preempted_by: Option<String>,
    /// Its attempts, oldest first (at most [`MAX_HISTORY`]: the first ones, every one that
    /// nominated a node, and the last ones).
    pub history: Vec<Attempt>,
    /// Attempts left out of `history`.
    pub history_hidden: usize,
    /// Its explained attempts shown.
    pub attempts: Vec<AttemptSection>,
}

/// Everything the HTML page shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportData {
    /// The page title.
    pub title: String,
    /// Totals of the run.
    pub summary: Summary,
    /// CPU, memory and pods utilisation, before and after.
    pub utilisation: Vec<UtilisationChart>,
    /// Filter reasons that kept pods off nodes, most frequent first.
    pub reasons: Vec<ReasonCount>,
    /// Score distribution per Score plugin, in the profile's order of first appearance.
    pub scores: Vec<ScoreDistribution>,
    /// The pods listed (every pod that did not end Scheduled first, then the others, in
    /// pod order, at most [`MAX_POD_ROWS`]).
    pub pods: Vec<PodRow>,
    /// Pods not listed.
    pub pods_hidden: usize,
    /// The explained pods shown, in pod order.
    pub sections: Vec<PodSection>,
    /// Explained (or preempted) pods without a section (`--explain NS/POD` gives any one).
    pub sections_hidden: usize,
}

/// Past this many nodes the utilisation charts draw bands of use instead of one bar pair
/// per node.
pub const MAX_NODE_ROWS: usize = 40;
/// The most used nodes listed under a banded chart.
pub const TOP_NODES: usize = 10;
/// At most this many pods in the pods table.
pub const MAX_POD_ROWS: usize = 1000;
/// Explained pods that did not end Scheduled, or that preemption touched: at most this
/// many sections.
pub const MAX_NOTABLE_SECTIONS: usize = 40;
/// Other explained pods: a sample of at most this many, spread over the pod order.
pub const MAX_SAMPLE_SECTIONS: usize = 10;
/// Preemption candidates shown per attempt.
const MAX_CANDIDATES: usize = 10;

/// The page title: what was simulated, as the command line named it.
pub fn title(paths: &[PathBuf], workload: Option<&std::path::Path>) -> String {
    let mut parts: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    if let Some(w) = workload {
        parts.push(format!("--workload {}", w.display()));
    }
    if parts.is_empty() {
        return "kubesched simulate".to_string();
    }
    format!("kubesched simulate {}", parts.join(" "))
}

/// Where a workload's measured phase begins: the first `createPods` op with `measure: true`
/// (none when nothing is measured). The report's "before" is the cluster at that point, so
/// that the setup ops' nodes and running pods count as what the run found.
pub fn measured_phase(workload: &crate::workload::Workload) -> Option<usize> {
    workload
        .ops
        .iter()
        .position(|op| matches!(op, crate::workload::Op::CreatePods(c) if c.measure))
}

/// An HTML id for a pod: `pod-` then the key with every other character than
/// `[A-Za-z0-9-]` as `_`.
pub fn anchor(pod: &str) -> String {
    let safe: String = pod
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("pod-{safe}")
}

fn percent(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        return 0.0;
    }
    // One decimal is what the chart can show; rounding keeps snapshots stable.
    (part as f64 * 1000.0 / whole as f64).round() / 10.0
}

const BANDS: [&str; 12] = [
    "empty",
    "0–10 %",
    "10–20 %",
    "20–30 %",
    "30–40 %",
    "40–50 %",
    "50–60 %",
    "60–70 %",
    "70–80 %",
    "80–90 %",
    "90–100 %",
    "over 100 %",
];

/// The band of a percentage: `empty` for 0, then bands of 10 % closed above, then over 100.
fn band_of(v: f64) -> usize {
    if v <= 0.0 {
        0
    } else if v > 100.0 {
        BANDS.len() - 1
    } else {
        ((v / 10.0).ceil() as usize).clamp(1, 10)
    }
}

fn utilisation(resource: &str, before: &[NodeUsage], after: &[NodeUsage]) -> UtilisationChart {
    let pick = |u: &NodeUsage| match resource {
        "cpu" => percent(u.cpu_requested, u.cpu_allocatable),
        "memory" => percent(u.memory_requested, u.memory_allocatable),
        _ => percent(u.pods, u.pods_allocatable),
    };
    let before_by: BTreeMap<&str, &NodeUsage> =
        before.iter().map(|u| (u.node.as_str(), u)).collect();
    let mut rows: Vec<UtilisationRow> = after
        .iter()
        .map(|u| UtilisationRow {
            node: u.node.clone(),
            // A node the run added had nothing before it.
            before: before_by.get(u.node.as_str()).map_or(0.0, |b| pick(b)),
            after: pick(u),
        })
        .collect();
    rows.sort_by(|a, b| b.after.total_cmp(&a.after).then(a.node.cmp(&b.node)));
    let mut bands = Vec::new();
    if rows.len() > MAX_NODE_ROWS {
        let mut counts = [(0usize, 0usize); BANDS.len()];
        for r in &rows {
            counts[band_of(r.before)].0 += 1;
            counts[band_of(r.after)].1 += 1;
        }
        bands = BANDS
            .iter()
            .zip(counts)
            .map(|(band, (before, after))| UtilisationBand {
                band: band.to_string(),
                before,
                after,
            })
            .collect();
        rows.truncate(TOP_NODES);
    }
    UtilisationChart {
        resource: resource.to_string(),
        hidden: after.len() - rows.len(),
        rows,
        bands,
    }
}

fn is_notable(p: &PodResult, explained: Option<&ExplainedPod>) -> bool {
    p.status != PodState::Scheduled
        || !p.victims.is_empty()
        || p.preempted_by.is_some()
        || p.nominated_node.is_some()
        || explained.is_some_and(|e| e.any_preemption)
}

/// The attempts a section lists: all when few, else the first ones, every one that
/// nominated a node, and the last ones.
fn history_shown(history: &[Attempt]) -> (Vec<Attempt>, usize) {
    if history.len() <= MAX_HISTORY {
        return (history.to_vec(), 0);
    }
    let edge = MAX_HISTORY / 4;
    let mut keep: BTreeSet<usize> = (0..edge)
        .chain(history.len() - edge..history.len())
        .collect();
    for (i, a) in history.iter().enumerate() {
        if keep.len() >= MAX_HISTORY {
            break;
        }
        if a.nominated_node.is_some() {
            keep.insert(i);
        }
    }
    let shown: Vec<Attempt> = keep.iter().map(|&i| history[i].clone()).collect();
    let hidden = history.len() - shown.len();
    (shown, hidden)
}

fn section(p: &PodResult, explained: Option<&ExplainedPod>) -> PodSection {
    let key = p.key();
    let (count, kept) = explained.map_or((0, &[][..]), |e| (e.count, e.kept.as_slice()));
    let last = kept.len().saturating_sub(1);
    // The attempts that nominated a node (what preemption decided) and the last one (what
    // decided where the pod is); every one when there are few.
    let attempts = kept
        .iter()
        .enumerate()
        .filter(|(i, a)| count <= 3 || *i == last || a.section.preemption.is_some())
        .take(MAX_HISTORY)
        .map(|(i, a)| {
            let mut section = a.section.clone();
            if i == last && p.status == PodState::Scheduled {
                if let Some(n) = &a.bound
                    && p.node.as_deref() == Some(n.node.as_str())
                {
                    section.top.push(n.clone());
                }
                section.chosen = p.node.clone();
            }
            section
        })
        .collect();
    let (history, history_hidden) = history_shown(&p.history);
    PodSection {
        anchor: anchor(&key),
        pod: key,
        status: format!("{:?}", p.status),
        node: p.node.clone(),
        nominated_node: p.nominated_node.clone(),
        victims: p.victims.clone(),
        preempted_by: p.preempted_by.clone(),
        history,
        history_hidden,
        attempts,
    }
}
impl ReportData {
    /// The page's model from a finished run (with every explanation it recorded) and the
    /// node usage before and after it.
    pub fn new(title: &str, report: &SimReport, before: &[NodeUsage], after: &[NodeUsage]) -> Self {
        Self::with_explained(
            title,
            report,
            &ExplainedPods::of_report(report),
            before,
            after,
        )
    }

    /// The page's model from a finished run whose explanations were condensed as they were
    /// recorded ([`ExplainedPods`]; the report's own explanations are not read), and the
    /// node usage before and after it.
    pub fn with_explained(
        title: &str,
        report: &SimReport,
        explained: &ExplainedPods,
        before: &[NodeUsage],
        after: &[NodeUsage],
    ) -> Self {
        let utilisation = ["cpu", "memory", "pods"]
            .into_iter()
            .map(|resource| utilisation(resource, before, after))
            .collect();

        let keys: Vec<String> = report.pods.iter().map(PodResult::key).collect();
        let explained = |i: usize| -> Option<&ExplainedPod> { explained.pods.get(&keys[i]) };

        // Reasons and scores read each pod's last explanation: the attempt that decided
        // where it is.
        let mut reasons: BTreeMap<&str, (usize, BTreeSet<u32>)> = BTreeMap::new();
        let mut scores: Vec<(String, i64, BTreeMap<i64, usize>)> = Vec::new();
        for (i, p) in report.pods.iter().enumerate() {
            let Some(e) = explained(i) else {
                continue;
            };
            if p.status == PodState::Unschedulable {
                for (reason, nodes) in &e.reasons {
                    let entry = reasons.entry(reason.as_str()).or_default();
                    entry.0 += 1;
                    entry.1.extend(nodes.iter().copied());
                }
            }
            for (plugin, weight, counts) in &e.scores {
                let at = match scores.iter().position(|(name, _, _)| name == plugin) {
                    Some(at) => at,
                    None => {
                        scores.push((plugin.clone(), *weight, BTreeMap::new()));
                        scores.len() - 1
                    }
                };
                for (value, n) in counts {
                    *scores[at].2.entry(*value).or_default() += n;
                }
            }
        }
        let mut reasons: Vec<ReasonCount> = reasons
            .into_iter()
            .map(|(reason, (pods, nodes))| ReasonCount {
                reason: reason.to_string(),
                pods,
                nodes: nodes.len(),
            })
            .collect();
        reasons.sort_by(|a, b| {
            b.pods
                .cmp(&a.pods)
                .then(b.nodes.cmp(&a.nodes))
                .then(a.reason.cmp(&b.reason))
        });
        let scores = scores
            .into_iter()
            .map(|(plugin, weight, counts)| ScoreDistribution {
                plugin,
                weight,
                count: counts.values().sum(),
                quartiles: counted_quartiles(&counts),
            })
            .collect();

        // Sections: the pods worth reading first, then an even sample of the rest.
        let (notable, plain): (Vec<usize>, Vec<usize>) = (0..report.pods.len())
            .filter(|&i| {
                // A preempted pod was running, so never explained: its section says for whom.
                let p = &report.pods[i];
                explained(i).is_some() || p.preempted_by.is_some() || !p.victims.is_empty()
            })
            .partition(|&i| is_notable(&report.pods[i], explained(i)));
        let mut chosen: BTreeSet<usize> =
            notable.iter().copied().take(MAX_NOTABLE_SECTIONS).collect();
        let sample = MAX_SAMPLE_SECTIONS.min(plain.len());
        for k in 0..sample {
            chosen.insert(plain[k * plain.len() / sample]);
        }
        let sections_hidden = notable.len() + plain.len() - chosen.len();
        let sections: Vec<PodSection> = chosen
            .iter()
            .map(|&i| section(&report.pods[i], explained(i)))
            .collect();

        // Pods table: those that did not end Scheduled first, in pod order.
        let mut listed: BTreeSet<usize> = (0..report.pods.len())
            .filter(|&i| report.pods[i].status != PodState::Scheduled)
            .take(MAX_POD_ROWS)
            .collect();
        for i in 0..report.pods.len() {
            if listed.len() >= MAX_POD_ROWS {
                break;
            }
            listed.insert(i);
        }
        let pods = listed
            .iter()
            .map(|&i| {
                let p = &report.pods[i];
                PodRow {
                    anchor: chosen.contains(&i).then(|| anchor(&keys[i])),
                    pod: keys[i].clone(),
                    status: format!("{:?}", p.status),
                    node: p.node.clone(),
                    attempts: p.attempts,
                    message: p.message.clone(),
                }
            })
            .collect();
        Self {
            title: title.to_string(),
            summary: report.summary.clone(),
            utilisation,
            reasons,
            scores,
            pods,
            pods_hidden: report.pods.len() - listed.len(),
            sections,
            sections_hidden,
        }
    }
}

/// [`quartiles`] of values given as how many times each occurs.
fn counted_quartiles(counts: &BTreeMap<i64, usize>) -> [f64; 5] {
    let total: usize = counts.values().sum();
    if total == 0 {
        return [0.0; 5];
    }
    // The k-th smallest value (0-based).
    let nth = |k: usize| -> f64 {
        let mut seen = 0;
        for (&v, &n) in counts {
            seen += n;
            if k < seen {
                return v as f64;
            }
        }
        counts.keys().next_back().map_or(0.0, |&v| v as f64)
    };
    let at = |q: f64| {
        let pos = q * (total - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        nth(lo) + (nth(hi) - nth(lo)) * (pos - lo as f64)
    };
    [nth(0), at(0.25), at(0.5), at(0.75), nth(total - 1)]
}

/// Min, quartiles (linear interpolation) and max of sorted values; zeros when empty.
#[cfg(test)]
fn quartiles(sorted: &[f64]) -> [f64; 5] {
    if sorted.is_empty() {
        return [0.0; 5];
    }
    let at = |q: f64| {
        let pos = q * (sorted.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
    };
    [
        sorted[0],
        at(0.25),
        at(0.5),
        at(0.75),
        sorted[sorted.len() - 1],
    ]
}

/// What the box plot draws for one distribution, straight from its five numbers (plotters'
/// `Quartiles` would recompute quartiles from them and clip the whiskers at 1.5 × IQR, so
/// the chart would contradict the table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxMarks {
    /// Whisker ends: the minimum and the maximum.
    pub whiskers: (f64, f64),
    /// The box: lower and upper quartile.
    pub quartile_box: (f64, f64),
    /// The median line.
    pub median: f64,
}

/// The marks of a distribution's box plot.
pub fn box_marks(d: &ScoreDistribution) -> BoxMarks {
    let [min, q1, median, q3, max] = d.quartiles;
    BoxMarks {
        whiskers: (min, max),
        quartile_box: (q1, q3),
        median,
    }
}

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing the {chart} chart: {message}")]
pub struct ChartError {
    chart: String,
    message: String,
}

fn chart_error(chart: &str) -> impl Fn(String) -> ChartError + '_ {
    move |message| ChartError {
        chart: chart.to_string(),
        message,
    }
}

const BEFORE: RGBColor = RGBColor(0xb0, 0xb8, 0xc4);
const AFTER: RGBColor = RGBColor(0x2b, 0x6c, 0xb0);
const REASON: RGBColor = RGBColor(0xc0, 0x39, 0x2b);
const BOX: RGBColor = RGBColor(0x27, 0x8a, 0x5b);
const WIDTH: u32 = 1060;
const FONT: &str = "sans-serif";

/// Row `i` of a horizontal chart is the band around y = n − 1 − i (first row on top); the
/// y axis runs from −0.5 to n − 0.5, so its ticks (step 1 with `y_labels(n)`) fall on the
/// band centres.
fn row_y(n: usize, i: usize) -> f64 {
    (n - 1 - i) as f64 - 0.5
}

fn label_at(labels: &[String], v: f64) -> String {
    let n = labels.len() as f64;
    let r = v.round();
    if (v - r).abs() > 1e-6 || r < 0.0 || r >= n {
        return String::new();
    }
    labels[labels.len() - 1 - r as usize].clone()
}

/// Pixels for the longest label at 12px (the browser lays out the text; this leaves room).
fn label_width(labels: &[String]) -> u32 {
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(4) as u32;
    (longest * 8 + 20).clamp(70, 380)
}

/// The smallest of 5, 10, 20, 25, 50, 100 % (then multiples of 100) at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    [5.0, 10.0, 20.0, 25.0, 50.0, 100.0]
        .into_iter()
        .find(|&c| v <= c)
        .unwrap_or_else(|| (v / 100.0).ceil() * 100.0)
}

/// The end of a count axis with room on the right (`room` in percent of the largest
/// count). Counts are drawn on an integer axis so that every tick is a distinct integer.
fn count_axis_end(largest: usize, room: usize) -> u32 {
    let largest = largest.max(1);
    u32::try_from(largest + (largest * room).div_ceil(100)).unwrap_or(u32::MAX)
}

fn caption_of(resource: &str) -> &'static str {
    match resource {
        "cpu" => "CPU requested (% of allocatable)",
        "memory" => "Memory requested (% of allocatable)",
        _ => "Pods (% of the node's pod limit)",
    }
}

/// Utilisation before and after: one bar pair per node, or past [`MAX_NODE_ROWS`] nodes,
/// one bar pair per band of use (how many nodes are in it).
pub fn utilisation_svg(chart: &UtilisationChart) -> Result<String, ChartError> {
    if !chart.bands.is_empty() {
        return bands_svg(chart);
    }
    let err = chart_error(&chart.resource);
    let labels: Vec<String> = chart.rows.iter().map(|r| r.node.clone()).collect();
    let n = labels.len().max(1);
    let height = (n as u32 * 26 + 90).max(160);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let pods = !matches!(chart.resource.as_str(), "cpu" | "memory");
        let highest = chart
            .rows
            .iter()
            .map(|r| r.after.max(r.before))
            .fold(0.0f64, f64::max);
        // CPU and memory always show the 100 % line (allocatable); a node's pod limit
        // (110 by default) is rarely near, and on a 0–100 % axis its bars would be slivers,
        // so the pods chart fits its axis to the fullest node instead.
        let axis_end = if pods {
            nice_ceiling(highest.max(5.0))
        } else {
            highest.max(100.0)
        };
        // Room on the right for the legend, clear of every bar.
        let max = axis_end as f32 * 1.3;
        let mut c = ChartBuilder::on(&root)
            .caption(caption_of(&chart.resource), (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width(&labels))
            .build_cartesian_2d(0f32..max, -0.5f64..n as f64 - 0.5)
            .map_err(|e| err(e.to_string()))?;
        c.configure_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| label_at(&labels, *v))
            .x_label_formatter(&|v| format!("{v:.0}%"))
            .x_desc(if pods {
                "pods on the node / the node's pod limit"
            } else {
                "requested / allocatable"
            })
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let rows = chart.rows.len();
        c.draw_series(chart.rows.iter().enumerate().map(|(i, r)| {
            let y = row_y(rows, i);
            Rectangle::new(
                [(0.0, y + 0.52), (r.before as f32, y + 0.86)],
                BEFORE.filled(),
            )
        }))
        .map_err(|e| err(e.to_string()))?
        .label("before the run")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], BEFORE.filled()));
        c.draw_series(chart.rows.iter().enumerate().map(|(i, r)| {
            let y = row_y(rows, i);
            Rectangle::new(
                [(0.0, y + 0.14), (r.after as f32, y + 0.48)],
                AFTER.filled(),
            )
        }))
        .map_err(|e| err(e.to_string()))?
        .label("after the run")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], AFTER.filled()));
        // 100 % marks the node's allocatable (or pod limit), when the axis reaches it.
        if f64::from(max) >= 100.0 {
            c.draw_series(std::iter::once(PathElement::new(
                vec![(100.0f32, -0.5), (100.0f32, n as f64 - 0.5)],
                BLACK.mix(0.5).stroke_width(1),
            )))
            .map_err(|e| err(e.to_string()))?;
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// How many nodes are in each band of use, before and after.
fn bands_svg(chart: &UtilisationChart) -> Result<String, ChartError> {
    let err = chart_error(&chart.resource);
    let labels: Vec<String> = chart.bands.iter().map(|b| b.band.clone()).collect();
    let n = labels.len().max(1);
    let height = (n as u32 * 26 + 90).max(160);
    let largest = chart
        .bands
        .iter()
        .map(|b| b.before.max(b.after))
        .max()
        .unwrap_or(0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut c = ChartBuilder::on(&root)
            .caption(caption_of(&chart.resource), (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width(&labels))
            // Room on the right for the legend.
            .build_cartesian_2d(0u32..count_axis_end(largest, 35), -0.5f64..n as f64 - 0.5)
            .map_err(|e| err(e.to_string()))?;
        c.configure_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| label_at(&labels, *v))
            .x_desc("nodes whose requests are in this band of their allocatable")
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let rows = chart.bands.len();
        c.draw_series(chart.bands.iter().enumerate().map(|(i, b)| {
            let y = row_y(rows, i);
            Rectangle::new(
                [(0, y + 0.52), (b.before as u32, y + 0.86)],
                BEFORE.filled(),
            )
        }))
        .map_err(|e| err(e.to_string()))?
        .label("before the run")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], BEFORE.filled()));
        c.draw_series(chart.bands.iter().enumerate().map(|(i, b)| {
            let y = row_y(rows, i);
            Rectangle::new([(0, y + 0.14), (b.after as u32, y + 0.48)], AFTER.filled())
        }))
        .map_err(|e| err(e.to_string()))?
        .label("after the run")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], AFTER.filled()));
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// Filter reasons of the unschedulable pods, as horizontal bars: how many pods each kept
/// off at least one node.
pub fn reasons_svg(reasons: &[ReasonCount]) -> Result<String, ChartError> {
    let err = chart_error("unschedulable reasons");
    let labels: Vec<String> = reasons.iter().map(|r| r.reason.clone()).collect();
    let n = labels.len().max(1);
    let height = (n as u32 * 30 + 90).max(150);
    let largest = reasons.iter().map(|r| r.pods).max().unwrap_or(0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut c = ChartBuilder::on(&root)
            .caption("Why pods did not fit", (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width(&labels))
            .build_cartesian_2d(0u32..count_axis_end(largest, 10), -0.5f64..n as f64 - 0.5)
            .map_err(|e| err(e.to_string()))?;
        c.configure_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| label_at(&labels, *v))
            .x_desc("unschedulable pods that a node rejected with this reason")
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        c.draw_series(reasons.iter().enumerate().map(|(i, r)| {
            let y = row_y(reasons.len(), i);
            Rectangle::new(
                [
                    (0, y + 0.2),
                    (u32::try_from(r.pods).unwrap_or(u32::MAX), y + 0.8),
                ],
                REASON.filled(),
            )
        }))
        .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// Each Score plugin's normalised scores as a horizontal box plot: whiskers from the
/// minimum to the maximum, the box from the lower to the upper quartile, a line at the
/// median (the numbers of the table under it).
pub fn scores_svg(scores: &[ScoreDistribution]) -> Result<String, ChartError> {
    let err = chart_error("score distribution");
    let labels: Vec<String> = scores
        .iter()
        .map(|s| format!("{} (×{})", s.plugin, s.weight))
        .collect();
    let n = labels.len().max(1);
    let height = (n as u32 * 36 + 90).max(150);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        // A little past 0 and 100, so that a whisker end on either is not hidden by the
        // axis.
        let mut c = ChartBuilder::on(&root)
            .caption("Normalised scores per Score plugin", (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width(&labels))
            .build_cartesian_2d(-2f64..102f64, -0.5f64..n as f64 - 0.5)
            .map_err(|e| err(e.to_string()))?;
        c.configure_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| label_at(&labels, *v))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .x_desc("normalised score (0–100), over every feasible node of every explained pod")
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let style = BOX.stroke_width(2);
        for (i, s) in scores.iter().enumerate() {
            let m = box_marks(s);
            let y = row_y(scores.len(), i) + 0.5;
            let (lo, hi) = m.whiskers;
            let (q1, q3) = m.quartile_box;
            let lines = [
                vec![(lo, y), (q1, y)],
                vec![(q3, y), (hi, y)],
                vec![(lo, y - 0.18), (lo, y + 0.18)],
                vec![(hi, y - 0.18), (hi, y + 0.18)],
                vec![(m.median, y - 0.3), (m.median, y + 0.3)],
            ];
            c.draw_series(lines.into_iter().map(|l| PathElement::new(l, style)))
                .map_err(|e| err(e.to_string()))?;
            c.draw_series(std::iter::once(Rectangle::new(
                [(q1, y - 0.3), (q3, y + 0.3)],
                BOX.mix(0.15).filled(),
            )))
            .map_err(|e| err(e.to_string()))?;
            c.draw_series(std::iter::once(Rectangle::new(
                [(q1, y - 0.3), (q3, y + 0.3)],
                style,
            )))
            .map_err(|e| err(e.to_string()))?;
        }
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#1f2933;padding:0 16px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:32px 0 8px;border-bottom:1px solid #d9e2ec;padding-bottom:4px}
h3{font-size:16px;margin:20px 0 6px}h4{font-size:14px;margin:12px 0 4px}
.muted{color:#616e7c}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{border:1px solid #d9e2ec;border-radius:6px;padding:10px 16px;min-width:110px}
.card b{display:block;font-size:24px}.charts{display:flex;flex-direction:column;gap:12px}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e4e7eb;vertical-align:top}
td:first-child,td.nowrap{white-space:nowrap}
th{background:#f5f7fa}.Scheduled{color:#1e7b4a}.Unschedulable,.Invalid,.Error{color:#b42318}.Pending,.Preempted,.Terminating{color:#8a5a00}
.ok{color:#1e7b4a}.no{color:#b42318}.remedy{color:#334e68;font-size:12px}
a{color:#2b6cb0}svg{max-width:100%;height:auto;border:1px solid #e4e7eb;border-radius:6px}
";

/// The page. Charts that cannot be drawn are replaced by their error (the rest is kept).
pub fn render(data: &ReportData) -> String {
    let mut out = String::new();
    let s = &data.summary;
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&data.title)
    );
    let _ = writeln!(
        out,
        "<h1>{}</h1><p class=\"muted\">kubesched simulation report: {} pods on {} nodes, {} scheduling attempts.</p>",
        esc(&data.title),
        s.pods,
        s.nodes,
        s.attempts
    );
    out.push_str("<h2 id=\"summary\">Summary</h2><div class=\"cards\">");
    for (label, value) in [
        ("pods", s.pods),
        ("scheduled", s.scheduled),
        ("unschedulable", s.unschedulable),
        ("pending", s.pending),
        ("preempted", s.preempted),
        ("nodes", s.nodes),
    ] {
        let _ = write!(out, "<div class=\"card\"><b>{value}</b>{label}</div>");
    }
    out.push_str("</div>\n<h2 id=\"utilisation\">Node utilisation, before and after</h2><div class=\"charts\">");
    for chart in &data.utilisation {
        push_chart(&mut out, utilisation_svg(chart));
        if !chart.bands.is_empty() {
            push_top_nodes(&mut out, chart);
        } else if chart.hidden > 0 {
            let _ = write!(
                out,
                "<p class=\"muted\">{} less used nodes are not drawn.</p>",
                chart.hidden
            );
        }
    }
    out.push_str("</div>\n<h2 id=\"reasons\">Unschedulable reasons</h2>");
    if data.reasons.is_empty() {
        out.push_str("<p class=\"muted\">No pod was left unschedulable by a Filter.</p>");
    } else {
        push_chart(&mut out, reasons_svg(&data.reasons));
        out.push_str("<table><tr><th>reason</th><th>unschedulable pods</th><th>distinct nodes giving it</th></tr>");
        for r in &data.reasons {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.reason),
                r.pods,
                r.nodes
            );
        }
        out.push_str("</table>");
    }
    out.push_str("\n<h2 id=\"scores\">Score distribution</h2>");
    if data.scores.is_empty() {
        out.push_str("<p class=\"muted\">No pod had more than one feasible node to score.</p>");
    } else {
        push_chart(&mut out, scores_svg(&data.scores));
        out.push_str("<table><tr><th>plugin</th><th>weight</th><th>scores</th><th>min</th><th>lower quartile</th><th>median</th><th>upper quartile</th><th>max</th></tr>");
        for d in &data.scores {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td>",
                esc(&d.plugin),
                d.weight,
                d.count
            );
            for q in d.quartiles {
                let _ = write!(out, "<td>{}</td>", number(q));
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
    }
    out.push_str("\n<h2 id=\"pods\">Pods</h2>");
    if data.pods_hidden > 0 {
        let _ = write!(
            out,
            "<p class=\"muted\">{} pods are listed, every one that did not end Scheduled first; {} scheduled pods are not (<code>kubesched simulate … -o json</code> lists every pod).</p>",
            data.pods.len(),
            data.pods_hidden
        );
    }
    out.push_str(
        "<table><tr><th>pod</th><th>status</th><th>node</th><th>attempts</th><th>message</th></tr>",
    );
    for p in &data.pods {
        let name = match &p.anchor {
            Some(a) => format!("<a href=\"#{a}\">{}</a>", esc(&p.pod)),
            None => esc(&p.pod),
        };
        let _ = write!(
            out,
            "<tr><td>{name}</td><td class=\"{} nowrap\">{}</td><td class=\"nowrap\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&p.status),
            esc(&p.status),
            esc(p.node.as_deref().unwrap_or("-")),
            p.attempts,
            esc(p.message.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table>\n<h2 id=\"explanations\">Explanations</h2>");
    if data.sections_hidden > 0 {
        let _ = write!(
            out,
            "<p class=\"muted\">{} pods are explained here: those that did not end Scheduled or that preemption touched (at most {MAX_NOTABLE_SECTIONS}), and a sample of the others. {} explained pods are left out; <code>kubesched simulate … --explain NS/POD</code> explains any one.</p>",
            data.sections.len(),
            data.sections_hidden
        );
    }
    let shown: BTreeSet<&str> = data.sections.iter().map(|s| s.pod.as_str()).collect();
    for section in &data.sections {
        push_section(&mut out, section, &shown);
    }
    out.push_str("</body></html>\n");
    out
}

/// A quartile as the table shows it: whole numbers bare, else one decimal.
fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn push_top_nodes(out: &mut String, chart: &UtilisationChart) {
    let _ = write!(
        out,
        "<p class=\"muted\">{} nodes, counted by band of use. The {} most used after the run:</p><table><tr><th>node</th><th>before</th><th>after</th></tr>",
        chart.rows.len() + chart.hidden,
        chart.rows.len()
    );
    for r in &chart.rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{:.1} %</td><td>{:.1} %</td></tr>",
            esc(&r.node),
            r.before,
            r.after
        );
    }
    out.push_str("</table>");
}

fn push_chart(out: &mut String, svg: Result<String, ChartError>) {
    match svg {
        Ok(svg) => {
            // The SVG backend writes an XML declaration-free <svg> element; inline it.
            out.push_str(&svg);
            out.push('\n');
        }
        Err(e) => {
            let _ = write!(out, "<p class=\"no\">{}</p>", esc(&e.to_string()));
        }
    }
}

fn result_word(r: AttemptResult) -> &'static str {
    match r {
        AttemptResult::Scheduled => "Scheduled",
        AttemptResult::Unschedulable => "Unschedulable",
        AttemptResult::Error => "Error",
    }
}

/// A pod's name, linked to its section when the page has one.
fn pod_link(out: &mut String, pod: &str, shown: &BTreeSet<&str>) {
    if shown.contains(pod) {
        let _ = write!(out, "<a href=\"#{}\">{}</a>", anchor(pod), esc(pod));
    } else {
        out.push_str(&esc(pod));
    }
}

/// One pod's section: what happened to it, its attempts, then its explained attempts.
fn push_section(out: &mut String, s: &PodSection, shown: &BTreeSet<&str>) {
    let _ = write!(
        out,
        "<h3 id=\"{}\">{} <span class=\"muted\">(<span class=\"{}\">{}</span>{})</span></h3>",
        s.anchor,
        esc(&s.pod),
        esc(&s.status),
        esc(&s.status),
        s.node
            .as_deref()
            .map(|n| format!(" on {}", esc(n)))
            .unwrap_or_default()
    );
    if let Some(n) = &s.nominated_node {
        let _ = write!(
            out,
            "<p>Preemption nominated node <b>{}</b> for it.</p>",
            esc(n)
        );
    }
    if !s.victims.is_empty() {
        let _ = write!(out, "<p>Victims preempted for it ({}): ", s.victims.len());
        for (i, v) in s.victims.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            pod_link(out, v, shown);
        }
        out.push_str(".</p>");
    }
    if let Some(by) = &s.preempted_by {
        out.push_str("<p>Preempted to make room for ");
        pod_link(out, by, shown);
        out.push_str(".</p>");
    }
    if !s.history.is_empty() {
        out.push_str("<table><tr><th>attempt</th><th>result</th><th>node</th><th>nominated</th><th>message</th></tr>");
        for a in &s.history {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"{r} nowrap\">{r}</td><td class=\"nowrap\">{}</td><td class=\"nowrap\">{}</td><td>{}</td></tr>",
                a.attempt,
                esc(a.node.as_deref().unwrap_or("-")),
                esc(a.nominated_node.as_deref().unwrap_or("-")),
                esc(&a.message),
                r = result_word(a.result),
            );
        }
        out.push_str("</table>");
        if s.history_hidden > 0 {
            let _ = write!(
                out,
                "<p class=\"muted\">{} attempts in between are not listed.</p>",
                s.history_hidden
            );
        }
    }
    for a in &s.attempts {
        push_attempt(out, a);
    }
    out.push_str("<p><a href=\"#pods\">back to the pods</a></p>\n");
}

fn push_attempt(out: &mut String, a: &AttemptSection) {
    let attempt = a
        .attempt
        .map(|n| format!("Attempt {n}"))
        .unwrap_or_else(|| "An attempt".into());
    let rejected: usize = a.rejected.iter().map(|g| g.nodes).sum();
    let _ = write!(
        out,
        "<h4>{attempt} <span class=\"muted\">(profile {}): {} feasible, {rejected} rejected</span></h4>",
        esc(&a.profile),
        a.feasible
    );
    if !a.top.is_empty() || !a.rejected.is_empty() {
        out.push_str("<table><tr><th>nodes</th><th>verdict</th><th>scores (normalised × weight)</th><th>total</th></tr>");
    }
    for n in &a.top {
        let verdict = if a.chosen.as_deref() == Some(n.node.as_str()) {
            "<span class=\"ok\"><b>feasible, chosen</b></span>"
        } else {
            "<span class=\"ok\">feasible</span>"
        };
        let scores: Vec<String> = n
            .scores
            .iter()
            .map(|s| format!("{} {}×{}", esc(&s.plugin), s.normalized, s.weight))
            .collect();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{verdict}</td><td>{}</td><td>{}</td></tr>",
            esc(&n.node),
            scores.join(", "),
            n.total_score.map(|t| t.to_string()).unwrap_or_default()
        );
    }
    if a.feasible > a.top.len() {
        let _ = write!(
            out,
            "<tr><td colspan=\"4\" class=\"muted\">{} more feasible nodes with lower scores</td></tr>",
            a.feasible - a.top.len()
        );
    }
    if a.unexamined > 0 {
        let _ = write!(
            out,
            "<tr><td colspan=\"4\" class=\"muted\">{} node{} not examined: the attempt stopped once it had found enough feasible nodes (percentageOfNodesToScore)</td></tr>",
            a.unexamined,
            if a.unexamined == 1 { "" } else { "s" }
        );
    }
    for g in &a.rejected {
        let more = if g.nodes > g.examples.len() {
            ", …"
        } else {
            ""
        };
        let mut v = format!(
            "<span class=\"no\">rejected by {}</span>: {}",
            esc(&g.plugin),
            esc(&g.reasons.join(", "))
        );
        for r in &g.remedies {
            let _ = write!(
                v,
                "<br><span class=\"remedy\">to fit {}: {} [{}]</span>",
                esc(&g.examples[0]),
                esc(&r.text),
                esc(&r.plugin)
            );
        }
        let _ = write!(
            out,
            "<tr><td>{} node{}: {}{more}</td><td colspan=\"3\">{v}</td></tr>",
            g.nodes,
            if g.nodes == 1 { "" } else { "s" },
            esc(&g.examples.join(", "))
        );
    }
    if !a.top.is_empty() || !a.rejected.is_empty() {
        out.push_str("</table>");
    }
    if let Some(p) = &a.preemption {
        push_preemption(out, p);
    }
}

fn push_preemption(out: &mut String, p: &PreemptionExplanation) {
    if let Some(why) = &p.not_eligible {
        let _ = write!(
            out,
            "<p>Preemption ({}): the pod may not preempt: {}.</p>",
            esc(&p.plugin),
            esc(why)
        );
        return;
    }
    let chosen = match &p.chosen {
        Some(c) => format!(
            "nominated node <b>{}</b>{}",
            esc(c),
            p.decided_by
                .map(|d| format!(" (decided by {})", esc(d.describe())))
                .unwrap_or_default()
        ),
        None => "no node: preemption cannot make room".to_string(),
    };
    let _ = write!(
        out,
        "<p>Preemption ({}): {} candidate(s), {} node(s) tried without one, {} where it would not help, {} not tried; {chosen}.</p>",
        esc(&p.plugin),
        p.candidates.len(),
        p.rejected.len(),
        p.not_helpful,
        p.not_tried
    );
    if p.candidates.is_empty() {
        return;
    }
    out.push_str("<table><tr><th>candidate</th><th>victims (priority)</th><th>PDB violations</th><th>outcome</th></tr>");
    for c in p.candidates.iter().take(MAX_CANDIDATES) {
        let victims: Vec<String> = c
            .victims
            .iter()
            .map(|v| format!("{} ({})", esc(&v.pod), v.priority))
            .collect();
        let outcome = match c.eliminated_by {
            Some(by) => format!("lost on {}", esc(by.describe())),
            None if p.chosen.as_deref() == Some(c.node.as_str()) => {
                "<b class=\"ok\">chosen</b>".to_string()
            }
            None => String::new(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{outcome}</td></tr>",
            esc(&c.node),
            victims.join(", "),
            c.pdb_violations
        );
    }
    out.push_str("</table>");
    if p.candidates.len() > MAX_CANDIDATES {
        let _ = write!(
            out,
            "<p class=\"muted\">{} more candidates are not listed.</p>",
            p.candidates.len() - MAX_CANDIDATES
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_html_ids() {
        assert_eq!(anchor("shop/web-1"), "pod-shop_web-1");
        assert_eq!(anchor("a.b/c"), "pod-a_b_c");
    }

    #[test]
    fn titles_name_what_was_simulated() {
        let w = PathBuf::from("examples/workloads/mixed-5000.yaml");
        assert_eq!(
            title(&[], Some(&w)),
            "kubesched simulate --workload examples/workloads/mixed-5000.yaml"
        );
        assert_eq!(
            title(&[PathBuf::from("a"), PathBuf::from("b.yaml")], None),
            "kubesched simulate a b.yaml"
        );
        assert_eq!(title(&[], None), "kubesched simulate");
    }

    #[test]
    fn pod_axis_rounds_up_to_a_readable_end() {
        assert_eq!(nice_ceiling(2.7), 5.0);
        assert_eq!(nice_ceiling(5.0), 5.0);
        assert_eq!(nice_ceiling(18.0), 20.0);
        assert_eq!(nice_ceiling(40.0), 50.0);
        assert_eq!(nice_ceiling(100.0), 100.0);
        assert_eq!(nice_ceiling(130.0), 200.0);
    }

    #[test]
    fn quartiles_interpolate() {
        assert_eq!(quartiles(&[]), [0.0; 5]);
        assert_eq!(quartiles(&[5.0]), [5.0; 5]);
        assert_eq!(
            quartiles(&[0.0, 10.0, 20.0, 30.0, 40.0]),
            [0.0, 10.0, 20.0, 30.0, 40.0]
        );
        assert_eq!(quartiles(&[0.0, 100.0]), [0.0, 25.0, 50.0, 75.0, 100.0]);
    }

    #[test]
    fn bands_close_above() {
        let bands: Vec<&str> = [0.0, 0.1, 10.0, 10.1, 99.9, 100.0, 100.1]
            .into_iter()
            .map(|v| BANDS[band_of(v)])
            .collect();
        assert_eq!(
            bands,
            [
                "empty",
                "0–10 %",
                "0–10 %",
                "10–20 %",
                "90–100 %",
                "90–100 %",
                "over 100 %"
            ]
        );
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    /// The contents of every `<text>` element of an SVG, trimmed.
    fn texts(svg: &str) -> Vec<(f64, String)> {
        let mut out = Vec::new();
        for part in svg.split("<text").skip(1) {
            let x = attr(part, "x").unwrap_or(f64::NAN);
            let body = part.split_once('>').map_or("", |(_, b)| b);
            let body = body.split("</text>").next().unwrap_or("").trim();
            out.push((x, body.to_string()));
        }
        out
    }

    fn attr(element: &str, name: &str) -> Option<f64> {
        let at = element.find(&format!(" {name}=\""))? + name.len() + 3;
        element[at..].split('"').next()?.parse().ok()
    }

    /// The numeric tick labels of a chart's x axis.
    fn x_ticks(svg: &str) -> Vec<(f64, String)> {
        texts(svg)
            .into_iter()
            .filter(|(_, t)| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
            .collect()
    }

    #[test]
    fn count_axes_tick_distinct_integers() {
        for largest in [1, 2, 3, 7, 12, 100, 5000] {
            let reasons = vec![
                ReasonCount {
                    reason: "Insufficient cpu".into(),
                    pods: largest,
                    nodes: 500,
                },
                ReasonCount {
                    reason: "node(s) had untolerated taint(s)".into(),
                    pods: 1,
                    nodes: 1,
                },
            ];
            let svg = reasons_svg(&reasons).expect("drawn");
            let ticks: Vec<String> = x_ticks(&svg).into_iter().map(|(_, t)| t).collect();
            assert!(ticks.len() >= 2, "{largest}: {ticks:?}");
            let values: Vec<u64> = ticks
                .iter()
                .map(|t| {
                    t.parse()
                        .unwrap_or_else(|_| panic!("{largest}: {t} is not an integer"))
                })
                .collect();
            let distinct: BTreeSet<u64> = values.iter().copied().collect();
            assert_eq!(distinct.len(), values.len(), "{largest}: {ticks:?}");
        }
    }

    /// The leftmost and rightmost x of the box plot's marks, in pixels.
    fn box_extent(svg: &str) -> (f64, f64) {
        let mut xs = Vec::new();
        for element in svg.split('<').filter(|e| e.contains("#278A5B")) {
            if element.starts_with("polyline") {
                let points = element.split("points=\"").nth(1).unwrap_or("");
                let points = points.split('"').next().unwrap_or("");
                for p in points.split_whitespace() {
                    if let Some(x) = p.split(',').next().and_then(|x| x.parse().ok()) {
                        xs.push(x);
                    }
                }
            } else if element.starts_with("rect") {
                let (x, w) = (attr(element, "x").unwrap(), attr(element, "width").unwrap());
                xs.extend([x, x + w]);
            } else if element.starts_with("line") {
                xs.extend([attr(element, "x1").unwrap(), attr(element, "x2").unwrap()]);
            }
        }
        assert!(!xs.is_empty(), "no box plot marks");
        (
            xs.iter().copied().fold(f64::INFINITY, f64::min),
            xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        )
    }

    /// The pixel x of an axis value, from the two tick labels around it.
    fn pixel_of(svg: &str, value: f64) -> f64 {
        let ticks: Vec<(f64, f64)> = x_ticks(svg)
            .into_iter()
            .filter_map(|(x, t)| Some((t.parse::<f64>().ok()?, x)))
            .collect();
        let (v0, x0) = ticks[0];
        let (v1, x1) = ticks[ticks.len() - 1];
        x0 + (value - v0) * (x1 - x0) / (v1 - v0)
    }

    #[test]
    fn the_box_plot_draws_the_tables_numbers() {
        // Two distributions of examples/cluster where plotters' own box plot disagreed
        // with the table: a whisker at 100 instead of 0, and whiskers at 0–100 for 2–77.
        for quartiles in [
            [0.0, 100.0, 100.0, 100.0, 100.0],
            [2.0, 9.0, 31.5, 61.5, 77.0],
        ] {
            let d = ScoreDistribution {
                plugin: "P".into(),
                weight: 1,
                count: 20,
                quartiles,
            };
            let marks = box_marks(&d);
            assert_eq!(marks.whiskers, (quartiles[0], quartiles[4]));
            assert_eq!(marks.quartile_box, (quartiles[1], quartiles[3]));
            assert_eq!(marks.median, quartiles[2]);
            let svg = scores_svg(std::slice::from_ref(&d)).expect("drawn");
            let (lo, hi) = box_extent(&svg);
            // Within the stroke width of where the table's min and max fall.
            let (want_lo, want_hi) = (pixel_of(&svg, quartiles[0]), pixel_of(&svg, quartiles[4]));
            assert!(
                (lo - want_lo).abs() <= 3.0,
                "{quartiles:?}: min at {lo}, want {want_lo}"
            );
            assert!(
                (hi - want_hi).abs() <= 3.0,
                "{quartiles:?}: max at {hi}, want {want_hi}"
            );
        }
    }
}
