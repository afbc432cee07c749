//! `cargo xtask bench-plot`: the scale curve of docs/benchmarks.md, drawn from
//! `kubesched bench --output json` results. For every workload of the scale families, the
//! median over the given runs of pods/s, nodes examined per second and peak RSS, against
//! the node count, as a Markdown table and an SVG of three panels (plotters' SVG backend,
//! no font files: text is left to the SVG viewer).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use serde::Deserialize;

use crate::Error;

/// The workload families run at 500, 5000, 15,000 and 50,000 nodes.
pub const SCALE_FAMILIES: [&str; 2] = ["SchedulingBasic", "TopologySpreading"];

/// What the plot reads of one bench result (the JSON has more).
#[derive(Debug, Clone, Deserialize)]
struct BenchRow {
    workload: String,
    nodes: u64,
    pods_per_second: f64,
    #[serde(default)]
    nodes_examined_per_second: f64,
    #[serde(default)]
    peak_rss_bytes: Option<u64>,
}

/// One workload's medians over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePoint {
    /// The family (`SchedulingBasic`).
    pub family: String,
    /// Nodes in the cluster.
    pub nodes: u64,
    /// How many runs the medians are over.
    pub runs: usize,
    /// Median pods/s.
    pub pods_per_second: f64,
    /// Median nodes examined per second.
    pub nodes_examined_per_second: f64,
    /// Median peak RSS in MiB (0 when no run reported it).
    pub peak_rss_mib: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// The scale families' points from the JSON texts of several runs (each a list of
/// results; `source` names each text in errors), ordered by family then node count.
pub fn scale_points(runs: &[(String, String)]) -> Result<Vec<ScalePoint>, Error> {
    let mut by_workload: BTreeMap<(String, u64), Vec<BenchRow>> = BTreeMap::new();
    for (source, text) in runs {
        let rows: Vec<BenchRow> = serde_json::from_str(text)
            .map_err(|e| Error::new(format!("{source}: not a bench JSON list: {e}")))?;
        for row in rows {
            let family = row
                .workload
                .split('/')
                .next()
                .unwrap_or_default()
                .to_string();
            if SCALE_FAMILIES.contains(&family.as_str()) {
                by_workload
                    .entry((family, row.nodes))
                    .or_default()
                    .push(row);
            }
        }
    }
    Ok(by_workload
        .into_iter()
        .map(|((family, nodes), rows)| {
            let rss: Vec<f64> = rows
                .iter()
                .filter_map(|r| r.peak_rss_bytes)
                .map(|b| b as f64 / 1_048_576.0)
                .collect();
            ScalePoint {
                family,
                nodes,
                runs: rows.len(),
                pods_per_second: median(rows.iter().map(|r| r.pods_per_second).collect()),
                nodes_examined_per_second: median(
                    rows.iter().map(|r| r.nodes_examined_per_second).collect(),
                ),
                peak_rss_mib: median(rss),
            }
        })
        .collect())
}

/// The points as a Markdown table.
pub fn markdown(points: &[ScalePoint]) -> String {
    let mut out = String::from(
        "| Workload | Nodes | Runs | Pods/s | Nodes examined/s | Peak RSS MiB |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for p in points {
        out.push_str(&format!(
            "| {}/{}Nodes | {} | {} | {:.0} | {:.0} | {:.0} |\n",
            p.family,
            p.nodes,
            p.nodes,
            p.runs,
            p.pods_per_second,
            p.nodes_examined_per_second,
            p.peak_rss_mib
        ));
    }
    out
}

type Metric = fn(&ScalePoint) -> f64;

const PANELS: [(&str, Metric); 3] = [
    ("pods/s", |p| p.pods_per_second),
    ("nodes examined/s (millions)", |p| {
        p.nodes_examined_per_second / 1e6
    }),
    ("peak RSS (MiB)", |p| p.peak_rss_mib),
];

const COLORS: [RGBColor; 2] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40)];

fn draw_error(e: impl std::fmt::Display) -> Error {
    Error::new(format!("drawing the plot: {e}"))
}

/// Draws the three panels (x: nodes, logarithmic) into an SVG file.
pub fn render_svg(points: &[ScalePoint], out: &Path) -> Result<(), Error> {
    if points.is_empty() {
        return Err(Error::new(format!(
            "no results of the scale families ({}) to plot",
            SCALE_FAMILIES.join(", ")
        )));
    }
    let root = SVGBackend::new(out, (1200, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let panels = root.split_evenly((1, PANELS.len()));
    let min_nodes = points.iter().map(|p| p.nodes).min().unwrap_or(1).max(1) as f64;
    let max_nodes = points.iter().map(|p| p.nodes).max().unwrap_or(1).max(1) as f64;
    let x_range = (min_nodes * 0.8)..(max_nodes * 1.25);
    for (area, (title, metric)) in panels.iter().zip(PANELS) {
        let top = points.iter().map(metric).fold(0.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(x_range.clone().log_scale(), 0.0..top.max(1e-9))
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc("nodes")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.1}"))
            .draw()
            .map_err(draw_error)?;
        for (family, color) in SCALE_FAMILIES.iter().zip(COLORS) {
            let series: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.family == *family)
                .map(|p| (p.nodes as f64, metric(p)))
                .collect();
            if series.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(series.clone(), color.stroke_width(2)))
                .map_err(draw_error)?
                .label(*family)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    series
                        .into_iter()
                        .map(|xy| Circle::new(xy, 3, color.filled())),
                )
                .map_err(draw_error)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw_error)?;
    }
    root.present().map_err(draw_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: &[(&str, u64, f64, f64, u64)]) -> String {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|(w, nodes, pps, neps, rss)| {
                serde_json::json!({
                    "workload": w, "nodes": nodes, "pods_per_second": pps,
                    "nodes_examined_per_second": neps, "peak_rss_bytes": rss,
                    "measured_pods": 1, "attempts": 1,
                })
            })
            .collect();
        serde_json::to_string(&list).unwrap_or_default()
    }

    #[test]
    fn medians_per_workload_of_the_scale_families_only() {
        let mib = 1_048_576;
        let runs = vec![
            (
                "a.json".to_string(),
                run(&[
                    ("SchedulingBasic/500Nodes", 500, 100.0, 10.0, 10 * mib),
                    ("SchedulingBasic/5000Nodes", 5000, 50.0, 20.0, 100 * mib),
                    ("Unschedulable/500Nodes", 500, 1.0, 1.0, mib),
                ]),
            ),
            (
                "b.json".to_string(),
                run(&[("SchedulingBasic/500Nodes", 500, 300.0, 30.0, 30 * mib)]),
            ),
            (
                "c.json".to_string(),
                run(&[("SchedulingBasic/500Nodes", 500, 200.0, 20.0, 20 * mib)]),
            ),
        ];
        let points = scale_points(&runs).expect("valid");
        assert_eq!(points.len(), 2);
        assert_eq!(
            points[0],
            ScalePoint {
                family: "SchedulingBasic".into(),
                nodes: 500,
                runs: 3,
                pods_per_second: 200.0,
                nodes_examined_per_second: 20.0,
                peak_rss_mib: 20.0,
            }
        );
        assert_eq!(points[1].nodes, 5000);
        assert_eq!(points[1].runs, 1);
        assert!(
            markdown(&points).contains("| SchedulingBasic/5000Nodes | 5000 | 1 | 50 | 20 | 100 |"),
            "{}",
            markdown(&points)
        );
    }

    #[test]
    fn even_runs_average_the_middle_two() {
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn bad_json_names_the_file() {
        let err = scale_points(&[("x.json".into(), "{".into())]).expect_err("invalid");
        assert!(err.to_string().starts_with("x.json: "), "{err}");
    }

    #[test]
    fn the_svg_has_a_line_per_family_and_a_panel_per_metric() {
        let runs = vec![(
            "a.json".to_string(),
            run(&[
                ("SchedulingBasic/500Nodes", 500, 100.0, 1e6, 10),
                ("SchedulingBasic/5000Nodes", 5000, 50.0, 2e6, 20),
                ("TopologySpreading/500Nodes", 500, 80.0, 1e6, 10),
                ("TopologySpreading/5000Nodes", 5000, 40.0, 2e6, 20),
            ]),
        )];
        let points = scale_points(&runs).expect("valid");
        let out = std::env::temp_dir().join(format!("xtask-plot-{}.svg", std::process::id()));
        render_svg(&points, &out).expect("drawn");
        let svg = std::fs::read_to_string(&out).expect("written");
        std::fs::remove_file(&out).ok();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        for text in [
            "pods/s",
            "peak RSS (MiB)",
            "SchedulingBasic",
            "TopologySpreading",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(render_svg(&[], &out).is_err());
    }
}
