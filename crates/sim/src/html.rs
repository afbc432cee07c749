//! `kubesched simulate --report FILE.html`: one self-contained HTML page (inline CSS, inline
//! SVG charts drawn by plotters, no scripts, fonts, images or links outside the file).
//!
//! [`ReportData`] is the model the page is rendered from (what tests snapshot); [`render`]
//! turns it into HTML. It reads a finished [`SimReport`] and the node usage before and after
//! the run; it never schedules anything itself.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use kubesched_scheduler::Explanation;
use plotters::prelude::*;
use serde::Serialize;

use crate::report::{PodState, SimReport, Summary};
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

/// One resource's utilisation chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilisationChart {
    /// `cpu`, `memory` or `pods`.
    pub resource: String,
    /// Nodes shown, most used after the run first.
    pub rows: Vec<UtilisationRow>,
    /// Nodes left out of the chart (only the [`MAX_NODE_ROWS`] most used are drawn).
    pub hidden: usize,
}

/// How often a Filter reason rejected a node for the pods left unschedulable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    /// The reason, as Filter gave it.
    pub reason: String,
    /// Node rejections with this reason, summed over the unschedulable pods.
    pub nodes: usize,
    /// Unschedulable pods that got it on at least one node.
    pub pods: usize,
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
    /// The anchor of its explanation section, when it has one.
    pub anchor: Option<String>,
    /// Where it ended.
    pub status: String,
    /// Its node, if any.
    pub node: Option<String>,
    /// The last message.
    pub message: Option<String>,
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
    /// The pods.
    pub pods: Vec<PodRow>,
    /// Each pod's last explained attempt, in pod order.
    pub explanations: Vec<(String, Explanation)>,
}

/// At most this many nodes per utilisation chart (the most used), so the page stays readable.
pub const MAX_NODE_ROWS: usize = 40;

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

impl ReportData {
    /// The page's model from a finished run and the node usage before and after it.
    pub fn new(title: &str, report: &SimReport, before: &[NodeUsage], after: &[NodeUsage]) -> Self {
        let before_by: BTreeMap<&str, &NodeUsage> =
            before.iter().map(|u| (u.node.as_str(), u)).collect();
        let utilisation = ["cpu", "memory", "pods"]
            .into_iter()
            .map(|resource| {
                let pick = |u: &NodeUsage| match resource {
                    "cpu" => percent(u.cpu_requested, u.cpu_allocatable),
                    "memory" => percent(u.memory_requested, u.memory_allocatable),
                    _ => percent(u.pods, u.pods_allocatable),
                };
                let mut rows: Vec<UtilisationRow> = after
                    .iter()
                    .map(|u| UtilisationRow {
                        node: u.node.clone(),
                        before: before_by.get(u.node.as_str()).map_or(0.0, |b| pick(b)),
                        after: pick(u),
                    })
                    .collect();
                rows.sort_by(|a, b| b.after.total_cmp(&a.after).then(a.node.cmp(&b.node)));
                let hidden = rows.len().saturating_sub(MAX_NODE_ROWS);
                rows.truncate(MAX_NODE_ROWS);
                UtilisationChart {
                    resource: resource.to_string(),
                    rows,
                    hidden,
                }
            })
            .collect();

        // The last explanation of each pod is the attempt that decided where it is.
        let mut last: BTreeMap<&str, &Explanation> = BTreeMap::new();
        for e in &report.explanations {
            last.insert(e.pod.as_str(), e);
        }
        let mut reasons: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        let mut scores: Vec<(String, i64, Vec<f64>)> = Vec::new();
        for p in &report.pods {
            let Some(e) = last.get(p.key().as_str()) else {
                continue;
            };
            if p.status == PodState::Unschedulable {
                let mut seen = std::collections::BTreeSet::new();
                for n in e.nodes.iter().filter(|n| !n.feasible) {
                    for r in &n.reasons {
                        let entry = reasons.entry(r.as_str()).or_default();
                        entry.0 += 1;
                        if seen.insert(r.as_str()) {
                            entry.1 += 1;
                        }
                    }
                }
            }
            for n in &e.nodes {
                for s in &n.scores {
                    match scores.iter_mut().find(|(name, _, _)| *name == s.plugin) {
                        Some((_, _, values)) => values.push(s.normalized as f64),
                        None => {
                            scores.push((s.plugin.clone(), s.weight, vec![s.normalized as f64]))
                        }
                    }
                }
            }
        }
        let mut reasons: Vec<ReasonCount> = reasons
            .into_iter()
            .map(|(reason, (nodes, pods))| ReasonCount {
                reason: reason.to_string(),
                nodes,
                pods,
            })
            .collect();
        reasons.sort_by(|a, b| b.nodes.cmp(&a.nodes).then(a.reason.cmp(&b.reason)));
        let scores = scores
            .into_iter()
            .map(|(plugin, weight, mut values)| {
                values.sort_by(f64::total_cmp);
                ScoreDistribution {
                    plugin,
                    weight,
                    count: values.len(),
                    quartiles: quartiles(&values),
                }
            })
            .collect();
        let pods = report
            .pods
            .iter()
            .map(|p| {
                let key = p.key();
                PodRow {
                    anchor: last.contains_key(key.as_str()).then(|| anchor(&key)),
                    pod: key,
                    status: format!("{:?}", p.status),
                    node: p.node.clone(),
                    message: p.message.clone(),
                }
            })
            .collect();
        let explanations = report
            .pods
            .iter()
            .filter_map(|p| {
                let key = p.key();
                last.get(key.as_str()).map(|e| (anchor(&key), (*e).clone()))
            })
            .collect();
        Self {
            title: title.to_string(),
            summary: report.summary.clone(),
            utilisation,
            reasons,
            scores,
            pods,
            explanations,
        }
    }
}

/// Min, quartiles (linear interpolation) and max of sorted values; zeros when empty.
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

/// Utilisation before and after, one bar pair per node.
pub fn utilisation_svg(chart: &UtilisationChart) -> Result<String, ChartError> {
    let err = chart_error(&chart.resource);
    let labels: Vec<String> = chart.rows.iter().map(|r| r.node.clone()).collect();
    let n = labels.len().max(1);
    let height = (n as u32 * 26 + 90).max(160);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let pods = !matches!(chart.resource.as_str(), "cpu" | "memory");
        let caption = match chart.resource.as_str() {
            "cpu" => "CPU requested (% of allocatable)",
            "memory" => "Memory requested (% of allocatable)",
            _ => "Pods (% of the node's pod limit)",
        };
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
            .caption(caption, (FONT, 18))
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

/// Filter reasons of the unschedulable pods, as horizontal bars.
pub fn reasons_svg(reasons: &[ReasonCount]) -> Result<String, ChartError> {
    let err = chart_error("unschedulable reasons");
    let labels: Vec<String> = reasons.iter().map(|r| r.reason.clone()).collect();
    let n = labels.len().max(1);
    let height = (n as u32 * 30 + 90).max(150);
    let max = reasons.iter().map(|r| r.nodes).max().unwrap_or(1).max(1) as f32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut c = ChartBuilder::on(&root)
            .caption("Why pods did not fit", (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width(&labels))
            .build_cartesian_2d(0f32..max * 1.1, -0.5f64..n as f64 - 0.5)
            .map_err(|e| err(e.to_string()))?;
        c.configure_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| label_at(&labels, *v))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .x_desc("nodes rejected with this reason, summed over unschedulable pods")
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        c.draw_series(reasons.iter().enumerate().map(|(i, r)| {
            let y = row_y(reasons.len(), i);
            Rectangle::new([(0.0, y + 0.2), (r.nodes as f32, y + 0.8)], REASON.filled())
        }))
        .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// Each Score plugin's normalised scores as a horizontal box plot.
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
        let mut c = ChartBuilder::on(&root)
            .caption("Normalised scores per Score plugin", (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_width(&labels))
            .build_cartesian_2d(0f32..100f32, -0.5f64..n as f64 - 0.5)
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
        c.draw_series(scores.iter().enumerate().map(|(i, s)| {
            let q = s.quartiles;
            let quartiles = Quartiles::new(&[q[0], q[1], q[2], q[3], q[4]]);
            Boxplot::new_horizontal(row_y(scores.len(), i) + 0.5, &quartiles)
                .width(18)
                .whisker_width(0.6)
                .style(BOX.stroke_width(2))
        }))
        .map_err(|e| err(e.to_string()))?;
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
h3{font-size:16px;margin:20px 0 6px}
.muted{color:#616e7c}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{border:1px solid #d9e2ec;border-radius:6px;padding:10px 16px;min-width:110px}
.card b{display:block;font-size:24px}.charts{display:flex;flex-direction:column;gap:12px}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e4e7eb;vertical-align:top}
td:first-child,td.nowrap{white-space:nowrap}
th{background:#f5f7fa}.Scheduled{color:#1e7b4a}.Unschedulable,.Invalid{color:#b42318}.Pending,.Preempted,.Terminating{color:#8a5a00}
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
        if chart.hidden > 0 {
            let _ = write!(
                out,
                "<p class=\"muted\">{} less used nodes are not drawn.</p>",
                chart.hidden
            );
        }
    }
    out.push_str("</div>\n<h2 id=\"reasons\">Unschedulable reasons</h2>");
    if data.reasons.is_empty() {
        out.push_str("<p class=\"muted\">Every pod that was attempted found a node.</p>");
    } else {
        push_chart(&mut out, reasons_svg(&data.reasons));
        out.push_str("<table><tr><th>reason</th><th>nodes</th><th>pods</th></tr>");
        for r in &data.reasons {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.reason),
                r.nodes,
                r.pods
            );
        }
        out.push_str("</table>");
    }
    out.push_str("\n<h2 id=\"scores\">Score distribution</h2>");
    if data.scores.is_empty() {
        out.push_str("<p class=\"muted\">No pod had more than one feasible node to score.</p>");
    } else {
        push_chart(&mut out, scores_svg(&data.scores));
        out.push_str("<table><tr><th>plugin</th><th>weight</th><th>scores</th><th>min</th><th>median</th><th>max</th></tr>");
        for d in &data.scores {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td></tr>",
                esc(&d.plugin),
                d.weight,
                d.count,
                d.quartiles[0],
                d.quartiles[2],
                d.quartiles[4]
            );
        }
        out.push_str("</table>");
    }
    out.push_str("\n<h2 id=\"pods\">Pods</h2><table><tr><th>pod</th><th>status</th><th>node</th><th>message</th></tr>");
    for p in &data.pods {
        let name = match &p.anchor {
            Some(a) => format!("<a href=\"#{a}\">{}</a>", esc(&p.pod)),
            None => esc(&p.pod),
        };
        let _ = write!(
            out,
            "<tr><td>{name}</td><td class=\"{} nowrap\">{}</td><td class=\"nowrap\">{}</td><td>{}</td></tr>",
            esc(&p.status),
            esc(&p.status),
            esc(p.node.as_deref().unwrap_or("-")),
            esc(p.message.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table>\n<h2 id=\"explanations\">Explanations</h2>");
    for (a, e) in &data.explanations {
        let bound = data
            .pods
            .iter()
            .find(|p| p.anchor.as_deref() == Some(a.as_str()))
            .and_then(|p| p.node.as_deref());
        push_explanation(&mut out, a, e, bound);
    }
    out.push_str("</body></html>\n");
    out
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

/// One pod's section; `bound` is the node the pod ended on, marked in the table.
fn push_explanation(out: &mut String, anchor: &str, e: &Explanation, bound: Option<&str>) {
    let attempt = e
        .attempt
        .map(|a| format!(", attempt {a}"))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<h3 id=\"{anchor}\">{} <span class=\"muted\">(profile {}{attempt})</span></h3>",
        esc(&e.pod),
        esc(&e.profile)
    );
    out.push_str("<table><tr><th>node</th><th>verdict</th><th>scores (normalised × weight)</th><th>total</th></tr>");
    for n in &e.nodes {
        let verdict = if n.feasible && bound == Some(n.node.as_str()) {
            "<span class=\"ok\"><b>feasible, chosen</b></span>".to_string()
        } else if n.feasible {
            "<span class=\"ok\">feasible</span>".to_string()
        } else {
            let mut v = format!(
                "<span class=\"no\">rejected by {}</span>: {}",
                esc(n.rejected_by.as_deref().unwrap_or("?")),
                esc(&n.reasons.join(", "))
            );
            for r in &n.remedies {
                let _ = write!(
                    v,
                    "<br><span class=\"remedy\">to fit: {} [{}]</span>",
                    esc(&r.text),
                    esc(&r.plugin)
                );
            }
            v
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
    out.push_str("</table>");
    if let Some(p) = &e.preemption {
        let chosen = p
            .chosen
            .as_deref()
            .map(|c| format!("nominated to {}", esc(c)))
            .unwrap_or_else(|| "no node: preemption cannot make room".to_string());
        let _ = write!(
            out,
            "<p>Preemption ({}): {} candidate(s); {chosen}.</p>",
            esc(&p.plugin),
            p.candidates.len()
        );
    }
    out.push_str("<p><a href=\"#pods\">back to the pods</a></p>\n");
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
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
