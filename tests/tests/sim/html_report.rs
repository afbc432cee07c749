//! `kubesched simulate --report FILE.html` on examples/cluster: the data the page is drawn
//! from (snapshot), that the page needs nothing outside itself, and, where Chromium is
//! installed (`.ci/run` installs it), a headless screenshot that shows the charts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kubesched_sim::html::{AttemptSection, ReportData, measured_phase, render, title};
use kubesched_sim::{EXPLAIN_ALL, Workload, load_paths};
// Links every in-tree plugin into this test binary.
use kubesched_tests as _;

fn example_data() -> ReportData {
    data_of("examples/cluster")
}

/// The report data of an example folder, "before" taken before its pending pods are placed.
fn data_of(example: &str) -> ReportData {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(example);
    let (manifests, problems) = load_paths(std::slice::from_ref(&dir));
    assert!(problems.is_empty(), "{problems:?}");
    let loaded = match manifests.config.clone() {
        Some((file, text)) => kubesched_config::load_str(&text, &file).expect("valid config"),
        None => kubesched_config::default_config(),
    };
    kubesched_tests::with_simulation(&loaded, 0, Some(EXPLAIN_ALL), async |mut sim| {
        sim.load(manifests, example);
        let before = sim.node_usage();
        sim.settle().await;
        let report = sim.report();
        ReportData::new(
            &title(&[PathBuf::from(example)], None),
            &report,
            &before,
            &sim.node_usage(),
        )
    })
}

#[test]
fn report_data_of_the_example() {
    let data = example_data();
    // Every explained pod is linked from the pods table, and every link has its section.
    for p in &data.pods {
        if let Some(a) = &p.anchor {
            assert!(data.sections.iter().any(|s| s.anchor == *a), "{a}");
        }
    }
    assert_eq!(
        data.pods.iter().filter(|p| p.anchor.is_some()).count(),
        8,
        "the gated pod is never attempted, every other pod is explained"
    );
    // The explanations themselves are snapshot by tests/tests/sim/examples.rs.
    insta::assert_yaml_snapshot!(data, {
        ".summary.duration_seconds" => "[duration]",
        ".summary.pods_per_second" => "[rate]",
        ".summary.latency_ms_p50" => "[latency]",
        ".summary.latency_ms_p99" => "[latency]",
        ".sections[].attempts[].top" => "[nodes]",
        ".sections[].attempts[].preemption" => "[preemption]",
    });
}

#[test]
fn the_page_needs_nothing_outside_itself() {
    let html = render(&example_data());
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        html.matches("<svg").count(),
        5,
        "3 utilisation, reasons, scores"
    );
    let lower = html.to_ascii_lowercase();
    for banned in [
        "http://",
        "https://",
        "src=",
        "@import",
        "url(",
        "<script",
        "<link",
        "<img",
        "<iframe",
        "href=\"/",
        "href=\"file:",
    ] {
        // The SVG namespace is an identifier, not a fetch.
        let hits = lower
            .match_indices(banned)
            .filter(|(i, _)| !lower[*i..].starts_with("http://www.w3.org/2000/svg"))
            .count();
        assert_eq!(hits, 0, "{banned} in the page");
    }
    // Links stay inside the page.
    for (i, _) in lower.match_indices("href=\"") {
        assert!(lower[i + 6..].starts_with('#'), "{}", &lower[i..i + 40]);
    }
}

#[test]
fn the_preemption_example_shows_the_nominating_attempt_and_its_victims() {
    let data = data_of("examples/preemption");
    let train = data
        .sections
        .iter()
        .find(|s| s.pod == "ml/train-1")
        .expect("ml/train-1 is explained");
    assert_eq!(train.victims, ["batch/nightly-1"]);
    assert_eq!(train.nominated_node.as_deref(), Some("node-2"));
    // Its first attempt nominated node-2 (what preemption decided); the second bound it.
    let nominating = train
        .attempts
        .iter()
        .find(|a| a.preemption.as_ref().and_then(|p| p.chosen.as_deref()) == Some("node-2"))
        .expect("the nominating attempt is shown");
    assert_eq!(nominating.attempt, Some(1));
    assert_eq!(train.attempts.last().and_then(|a| a.attempt), Some(2));
    assert_eq!(train.history.len(), 2);
    let victim = data
        .sections
        .iter()
        .find(|s| s.pod == "batch/nightly-1")
        .expect("the victim has a section");
    assert_eq!(victim.preempted_by.as_deref(), Some("ml/train-1"));

    let html = render(&data);
    for shown in [
        "Victims preempted for it (1): <a href=\"#pod-batch_nightly-1\">batch/nightly-1</a>",
        "Preempted to make room for <a href=\"#pod-ml_train-1\">ml/train-1</a>",
        "nominated node <b>node-2</b>",
        "Attempt 1",
    ] {
        assert!(html.contains(shown), "{shown} not in the page");
    }
    // The victim is listed among the chosen candidate's victims.
    assert!(
        html.contains("batch/nightly-1 ("),
        "the candidate table names the victim"
    );
}

/// A workload of `nodes` nodes with running pods, then `pods` measured pods of which a
/// hundredth never fit: the shape of examples/workloads/mixed-5000.yaml, smaller.
fn big_workload(nodes: usize, pods: usize) -> Workload {
    let text = format!(
        r#"
kind: Workload
name: Big
ops:
- createNodes:
    count: {nodes}
    zones: [zone-a, zone-b, zone-c]
    template:
      metadata: {{name: node}}
      status:
        allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}
- createPods:
    count: {nodes}
    namespace: existing
    template:
      metadata: {{name: running}}
      spec:
        containers:
        - {{name: c, image: app, resources: {{requests: {{cpu: "2", memory: 4Gi}}}}}}
- createPods:
    count: {small}
    namespace: small
    measure: true
    template:
      metadata: {{name: small}}
      spec:
        containers:
        - {{name: c, image: app, resources: {{requests: {{cpu: 100m, memory: 256Mi}}}}}}
- createPods:
    count: {huge}
    namespace: huge
    measure: true
    template:
      metadata: {{name: huge}}
      spec:
        containers:
        - {{name: c, image: app, resources: {{requests: {{cpu: "16", memory: 64Gi}}}}}}
"#,
        small = pods - pods / 100,
        huge = pods / 100,
    );
    Workload::from_str(&text, "big.yaml").expect("a valid workload")
}

#[test]
fn a_big_run_gives_a_small_page_with_before_bars() {
    let (nodes, pods) = (150, 1500);
    let data = big_run_data(nodes, pods);
    assert_eq!(data.title, "kubesched simulate --workload big.yaml");
    assert_eq!(data.summary.nodes, nodes);
    let cpu = &data.utilisation[0];
    // 150 nodes: bands of use, not 40 bars of the most used nodes, and the running pods
    // (2 of 8 cpu on every node) are there before the run.
    let before: usize = cpu.bands.iter().map(|b| b.before).sum();
    assert_eq!(before, nodes);
    let band = cpu
        .bands
        .iter()
        .find(|b| b.band == "20–30 %")
        .expect("band");
    assert_eq!(band.before, nodes, "{:?}", cpu.bands);
    assert!(cpu.rows.iter().all(|r| r.before == 25.0), "{:?}", cpu.rows);
    // Counts are of pods and of distinct nodes, never node rejections summed over pods.
    assert!(
        data.reasons
            .iter()
            .all(|r| r.nodes <= nodes && r.pods <= pods / 100)
    );

    let html = render(&data);
    let per_pod = html.len() / (pods + nodes);
    assert!(
        per_pod < 700,
        "{} bytes for {} pods: {per_pod} per pod",
        html.len(),
        pods + nodes
    );
    assert!(
        html.contains("--explain NS/POD"),
        "the note on left-out pods"
    );
    assert!(html.contains(&format!(
        "{} explained pods are left out",
        data.sections_hidden
    )));
}

/// Chromium's path: `KUBESCHED_CHROMIUM`, else `/usr/bin/chromium` when present.
fn chromium() -> Option<PathBuf> {
    std::env::var_os("KUBESCHED_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/bin/chromium")))
        .filter(|p| p.exists())
}

fn screenshot(
    browser: &Path,
    page: &Path,
    png: &Path,
    profile: &Path,
    height: usize,
) -> Result<(), String> {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size=1200,{height}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", browser.display()))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("chromium exited with {status}")),
            Ok(None) if start.elapsed() > Duration::from_secs(90) => {
                let _ = child.kill();
                return Err("chromium took more than 90 s".into());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[test]
fn headless_screenshot_shows_the_charts() {
    let Some(browser) = chromium() else {
        eprintln!(
            "skipped: no Chromium (install Debian's chromium, or set KUBESCHED_CHROMIUM); \
             check by hand: kubesched simulate examples/cluster --report r.html, open r.html"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("kubesched-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    assert_charts_drawn(&browser, &dir, "cluster", 1500, &render(&example_data()));
    // A big run's page (bands of use, a table of the most used nodes, capped explanations)
    // is drawn as well; its reasons come further down.
    assert_charts_drawn(
        &browser,
        &dir,
        "big",
        3000,
        &render(&big_run_data(150, 1500)),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The report data of [`big_workload`], "before" taken when its measured pods begin, as
/// `simulate --workload --report` does.
fn big_run_data(nodes: usize, pods: usize) -> ReportData {
    let workload = big_workload(nodes, pods);
    let path = PathBuf::from("big.yaml");
    kubesched_tests::with_simulation(
        &kubesched_config::default_config(),
        0,
        Some(EXPLAIN_ALL),
        async |mut sim| {
            sim.condense_explanations();
            let first = measured_phase(&workload).expect("measured ops");
            sim.run_workload_ops(&workload, 0..first)
                .await
                .expect("setup");
            let before = sim.node_usage();
            sim.run_workload_ops(&workload, first..workload.ops.len())
                .await
                .expect("run");
            ReportData::new(
                &title(&[], Some(&path)),
                &sim.report(),
                &before,
                &sim.node_usage(),
            )
        },
    )
}

/// Screenshots `html` in headless Chromium and checks the picture: not blank, with the
/// utilisation bars' blue and the reasons' red in it.
fn assert_charts_drawn(browser: &Path, dir: &Path, name: &str, height: usize, html: &str) {
    let page = dir.join(format!("{name}.html"));
    let png = dir.join(format!("{name}.png"));
    std::fs::write(&page, html).expect("page written");
    screenshot(
        browser,
        &page,
        &png,
        &dir.join(format!("profile-{name}")),
        height,
    )
    .expect("screenshot");

    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png).expect("png"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut buf).expect("a frame");
    let (w, h) = (frame.width as usize, frame.height as usize);
    assert_eq!((w, h), (1200, height), "{name}");
    let channels = frame.color_type.samples();
    let pixels = &buf[..frame.buffer_size()];
    let mut not_white = 0usize;
    let mut after_bars = 0usize;
    let mut reason_bars = 0usize;
    for px in pixels.chunks(channels) {
        let (r, g, b) = (px[0], px[1], px[2]);
        if (r, g, b) != (255, 255, 255) {
            not_white += 1;
        }
        // The "after the run" blue and the reasons' red of the charts.
        if r.abs_diff(0x2b) < 8 && g.abs_diff(0x6c) < 8 && b.abs_diff(0xb0) < 8 {
            after_bars += 1;
        }
        if r.abs_diff(0xc0) < 8 && g.abs_diff(0x39) < 8 && b.abs_diff(0x2b) < 8 {
            reason_bars += 1;
        }
    }
    let total = w * h;
    assert!(
        not_white * 20 > total,
        "{name}: mostly blank: {not_white} of {total}"
    );
    assert!(
        after_bars > 2000,
        "{name}: utilisation bars not drawn: {after_bars} pixels"
    );
    assert!(
        reason_bars > 2000,
        "{name}: reason bars not drawn: {reason_bars} pixels"
    );
}

/// The report data of an example folder twice: from a run that keeps every explanation
/// whole, and from one that condenses them as they are recorded (what `--report` does).
fn both_ways(example: &str) -> (ReportData, ReportData) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(example);
    let run = |condense: bool| {
        let (manifests, problems) = load_paths(std::slice::from_ref(&dir));
        assert!(problems.is_empty(), "{problems:?}");
        let loaded = match manifests.config.clone() {
            Some((file, text)) => kubesched_config::load_str(&text, &file).expect("valid config"),
            None => kubesched_config::default_config(),
        };
        let explain = (!condense).then_some(EXPLAIN_ALL);
        kubesched_tests::with_simulation(&loaded, 0, explain, async |mut sim| {
            if condense {
                sim.condense_explanations();
            }
            sim.load(manifests, example);
            let before = sim.node_usage();
            sim.settle().await;
            let explained = sim.take_explained();
            let mut report = sim.report();
            report.drop_timing();
            assert_eq!(
                report.explanations.is_empty(),
                condense,
                "condensing keeps no whole explanation"
            );
            let title = title(&[PathBuf::from(example)], None);
            if condense {
                ReportData::with_explained(&title, &report, &explained, &before, &sim.node_usage())
            } else {
                ReportData::new(&title, &report, &before, &sim.node_usage())
            }
        })
    };
    (run(false), run(true))
}

#[test]
fn condensing_explanations_as_they_are_recorded_changes_nothing_on_the_page() {
    for example in ["examples/cluster", "examples/preemption", "examples/spread"] {
        let (whole, condensed) = both_ways(example);
        assert!(!whole.sections.is_empty(), "{example}: explained");
        assert_eq!(whole, condensed, "{example}");
        assert_eq!(render(&whole), render(&condensed), "{example}");
    }
}

#[test]
fn condensing_keeps_the_pod_asked_for_whole() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/preemption");
    let explanations = |condense: bool| {
        let (manifests, _) = load_paths(std::slice::from_ref(&dir));
        kubesched_tests::with_simulation(
            &kubesched_config::default_config(),
            0,
            Some("ml/train-1"),
            async |mut sim| {
                if condense {
                    sim.condense_explanations();
                }
                sim.load(manifests, "examples/preemption");
                sim.settle().await;
                let explained = sim.take_explained();
                assert_eq!(explained.is_empty(), !condense);
                sim.into_report().explanations
            },
        )
    };
    let whole = explanations(false);
    assert_eq!(whole.len(), 2, "ml/train-1 is tried twice");
    assert!(whole.iter().all(|e| e.pod == "ml/train-1"));
    assert_eq!(explanations(true), whole);
}

#[test]
fn a_big_run_condensed_gives_the_same_page() {
    let (nodes, pods) = (60, 600);
    let workload = big_workload(nodes, pods);
    let path = PathBuf::from("big.yaml");
    let run = |condense: bool| {
        let explain = (!condense).then_some(EXPLAIN_ALL);
        kubesched_tests::with_simulation(
            &kubesched_config::default_config(),
            0,
            explain,
            async |mut sim| {
                if condense {
                    sim.condense_explanations();
                }
                let first = measured_phase(&workload).expect("measured ops");
                sim.run_workload_ops(&workload, 0..first)
                    .await
                    .expect("setup");
                let before = sim.node_usage();
                sim.run_workload_ops(&workload, first..workload.ops.len())
                    .await
                    .expect("run");
                let explained = sim.take_explained();
                let mut report = sim.report();
                report.drop_timing();
                let title = title(&[], Some(&path));
                if condense {
                    ReportData::with_explained(
                        &title,
                        &report,
                        &explained,
                        &before,
                        &sim.node_usage(),
                    )
                } else {
                    ReportData::new(&title, &report, &before, &sim.node_usage())
                }
            },
        )
    };
    let whole = run(false);
    assert!(!whole.reasons.is_empty() && !whole.scores.is_empty());
    assert_eq!(whole, run(true));
}

/// One chart of the page: the `n`-th inline SVG (0-based).
fn svg_of(html: &str, n: usize) -> String {
    let start = html
        .match_indices("<svg")
        .nth(n)
        .map(|(i, _)| i)
        .expect("the chart");
    let end = html[start..].find("</svg>").expect("closed") + start;
    html[start..end].to_string()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// An attribute of an SVG element, as a number.
fn num(element: &str, name: &str) -> Option<f64> {
    let at = element.find(&format!(" {name}=\""))? + name.len() + 3;
    element[at..].split('"').next()?.parse().ok()
}

/// The elements of an SVG named `tag`, each as its text from the name to its `>` (for
/// `text`, followed by its content).
fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
    svg.split('<')
        .filter(|e| e.starts_with(tag) && e[tag.len()..].starts_with(' '))
        .collect()
}

/// The labels of a chart's y axis (text anchored at its end), with their y in pixels.
fn row_labels(svg: &str) -> Vec<(f64, String)> {
    elements(svg, "text")
        .into_iter()
        .filter(|e| e.contains("text-anchor=\"end\""))
        .map(|e| {
            let body = e.split_once('>').map_or("", |(_, b)| b).trim();
            (num(e, "y").expect("y"), unescape(body))
        })
        .collect()
}

/// Axis values from pixels, read from the chart's first and last numeric x tick.
struct XAxis {
    v0: f64,
    x0: f64,
    per_px: f64,
}

impl XAxis {
    fn of(svg: &str) -> Self {
        let ticks: Vec<(f64, f64)> = elements(svg, "text")
            .into_iter()
            .filter(|e| e.contains("text-anchor=\"middle\""))
            .filter_map(|e| {
                let body = e.split_once('>')?.1.trim();
                Some((body.parse::<f64>().ok()?, num(e, "x")?))
            })
            .collect();
        assert!(ticks.len() >= 2, "x ticks: {ticks:?}");
        let (v0, x0) = ticks[0];
        let (v1, x1) = ticks[ticks.len() - 1];
        Self {
            v0,
            x0,
            per_px: (v1 - v0) / (x1 - x0),
        }
    }

    fn value(&self, x: f64) -> f64 {
        self.v0 + (x - self.x0) * self.per_px
    }
}

/// The reasons chart read back: each bar's label and the count its length stands for.
fn drawn_reasons(svg: &str) -> Vec<(String, f64)> {
    let axis = XAxis::of(svg);
    let labels = row_labels(svg);
    elements(svg, "rect")
        .into_iter()
        .filter(|e| e.contains("fill=\"#C0392B\""))
        .map(|e| {
            let (x, w) = (num(e, "x").expect("x"), num(e, "width").expect("width"));
            let mid = num(e, "y").expect("y") + num(e, "height").expect("height") / 2.0;
            let label = labels
                .iter()
                .min_by(|a, b| (a.0 - mid).abs().total_cmp(&(b.0 - mid).abs()))
                .expect("a label")
                .1
                .clone();
            (label, axis.value(x + w) - axis.value(x))
        })
        .collect()
}

/// The box plot read back: per row label, [min, lower quartile, median, upper quartile,
/// max] as the marks' positions stand for them.
fn drawn_boxes(svg: &str) -> Vec<Box5> {
    let axis = XAxis::of(svg);
    let mut rows = Vec::new();
    for (y, label) in row_labels(svg) {
        let near = |top: f64, bottom: f64| top - 1.0 <= y && y <= bottom + 1.0;
        let mut xs: Vec<f64> = Vec::new();
        let mut median = (0.0f64, f64::NAN);
        for e in elements(svg, "polyline")
            .into_iter()
            .filter(|e| e.contains("#278A5B"))
        {
            let points: Vec<(f64, f64)> = e
                .split("points=\"")
                .nth(1)
                .and_then(|p| p.split('"').next())
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|p| {
                    let (x, y) = p.split_once(',')?;
                    Some((x.parse().ok()?, y.parse().ok()?))
                })
                .collect();
            let (top, bottom) = points
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(t, b), p| {
                    (t.min(p.1), b.max(p.1))
                });
            if !near(top, bottom) {
                continue;
            }
            xs.extend(points.iter().map(|p| p.0));
            // The median is the tallest vertical mark.
            if points[0].0 == points[points.len() - 1].0 && bottom - top > median.0 {
                median = (bottom - top, points[0].0);
            }
        }
        let quartile_box = elements(svg, "rect")
            .into_iter()
            .filter(|e| e.contains("stroke=\"#278A5B\""))
            .find(|e| {
                let top = num(e, "y").expect("y");
                near(top, top + num(e, "height").expect("height"))
            })
            .map(|e| {
                let x = num(e, "x").expect("x");
                (x, x + num(e, "width").expect("width"))
            });
        let Some((q1, q3)) = quartile_box else {
            continue;
        };
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        rows.push((label, [lo, q1, median.1, q3, hi].map(|x| axis.value(x))));
    }
    rows
}

/// Min, quartiles (linear interpolation between the two nearest ranks) and max.
fn five_numbers(mut values: Vec<f64>) -> [f64; 5] {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let pos = q * (values.len() - 1) as f64;
        let lo = pos.floor() as usize;
        let hi = pos.ceil() as usize;
        values[lo] * (1.0 - (pos - lo as f64)) + values[hi] * (pos - lo as f64)
    };
    [
        values[0],
        at(0.25),
        at(0.5),
        at(0.75),
        values[values.len() - 1],
    ]
}

/// What the JSON report (`-o json`, every pod explained) says the charts should draw: per
/// Score plugin (labelled as the chart labels it) the five numbers of the normalised scores
/// of each pod's last attempt, and per Filter reason how many unschedulable pods a node
/// rejected with it in their last attempt.
fn numbers_of_the_json(json: &serde_json::Value) -> (Vec<Box5>, Vec<(String, f64)>) {
    let explanations = json["explanations"].as_array().expect("explanations");
    let mut scores: Vec<(String, Vec<f64>)> = Vec::new();
    let mut reasons: std::collections::BTreeMap<String, f64> = Default::default();
    for pod in json["pods"].as_array().expect("pods") {
        let key = format!(
            "{}/{}",
            pod["namespace"].as_str().expect("namespace"),
            pod["name"].as_str().expect("name")
        );
        let Some(last) = explanations.iter().rev().find(|e| e["pod"] == key.as_str()) else {
            continue;
        };
        let nodes = last["nodes"].as_array().expect("nodes");
        if pod["status"] == "Unschedulable" {
            let mut given = std::collections::BTreeSet::new();
            for n in nodes.iter().filter(|n| n["feasible"] == false) {
                for r in n["reasons"].as_array().into_iter().flatten() {
                    given.insert(r.as_str().expect("a reason").to_string());
                }
            }
            for r in given {
                *reasons.entry(r).or_default() += 1.0;
            }
        }
        for n in nodes {
            for s in n["scores"].as_array().into_iter().flatten() {
                let label = format!(
                    "{} (×{})",
                    s["plugin"].as_str().expect("plugin"),
                    s["weight"]
                );
                let value = s["normalized"].as_f64().expect("normalized");
                match scores.iter_mut().find(|(l, _)| *l == label) {
                    Some((_, values)) => values.push(value),
                    None => scores.push((label, vec![value])),
                }
            }
        }
    }
    let boxes = scores
        .into_iter()
        .map(|(label, values)| (label, five_numbers(values)))
        .collect();
    (boxes, reasons.into_iter().collect())
}

/// Reads the box plot and the reason bars back out of the page (the pixels of the marks,
/// through the axis ticks) and checks them against the numbers of the JSON report of the
/// same run: the chart, not only the table under it, tells what the JSON tells.
fn check_charts_against_json(
    label: &str,
    run: impl AsyncFnOnce(
        &mut kubesched_sim::Simulation,
    ) -> (Vec<kubesched_sim::html::NodeUsage>, String),
    config: &kubesched_config::LoadedConfig,
) {
    let (json, html) =
        kubesched_tests::with_simulation(config, 0, Some(EXPLAIN_ALL), async |mut sim| {
            // Whole explanations for the JSON, and the condensed ones the page is drawn from.
            sim.condense_explanations();
            let (before, title) = run(&mut sim).await;
            let explained = sim.take_explained();
            let report = sim.report();
            let data =
                ReportData::with_explained(&title, &report, &explained, &before, &sim.node_usage());
            (report.to_json(), render(&data))
        });
    let json: serde_json::Value = serde_json::from_str(&json).expect("the JSON report");
    let (want_boxes, want_reasons) = numbers_of_the_json(&json);
    assert!(!want_boxes.is_empty(), "{label}: scores");
    assert!(!want_reasons.is_empty(), "{label}: reasons");

    // Charts: 3 utilisation, then reasons, then scores.
    let mut got_reasons = drawn_reasons(&svg_of(&html, 3));
    got_reasons.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got_reasons.iter().map(|r| &r.0).collect::<Vec<_>>(),
        want_reasons.iter().map(|r| &r.0).collect::<Vec<_>>(),
        "{label}: the reasons drawn"
    );
    for ((reason, got), (_, want)) in got_reasons.iter().zip(&want_reasons) {
        assert!(
            (got - want).abs() < 0.05,
            "{label}: {reason}: the bar is {got} pods long, the JSON says {want}"
        );
    }
    let got_boxes = drawn_boxes(&svg_of(&html, 4));
    assert_eq!(
        got_boxes.iter().map(|b| &b.0).collect::<BTreeSetOf<'_>>(),
        want_boxes.iter().map(|b| &b.0).collect::<BTreeSetOf<'_>>(),
        "{label}: the Score plugins drawn"
    );
    for (plugin, got) in &got_boxes {
        let want = want_boxes
            .iter()
            .find(|(p, _)| p == plugin)
            .map(|(_, w)| w)
            .expect("in the JSON");
        for (i, what) in ["min", "lower quartile", "median", "upper quartile", "max"]
            .into_iter()
            .enumerate()
        {
            // A pixel of the 0–100 axis is about 0.15.
            assert!(
                (got[i] - want[i]).abs() <= 0.3,
                "{label}: {plugin}: the {what} is drawn at {:.2}, the JSON says {}",
                got[i],
                want[i]
            );
        }
    }
}

type BTreeSetOf<'a> = std::collections::BTreeSet<&'a String>;

/// A row label and its five numbers.
type Box5 = (String, [f64; 5]);

#[test]
fn the_charts_draw_the_json_reports_numbers() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
    let (manifests, _) = load_paths(std::slice::from_ref(&dir));
    let loaded = match manifests.config.clone() {
        Some((file, text)) => kubesched_config::load_str(&text, &file).expect("valid config"),
        None => kubesched_config::default_config(),
    };
    check_charts_against_json(
        "examples/cluster",
        async |sim| {
            sim.load(manifests, "examples/cluster");
            let before = sim.node_usage();
            sim.settle().await;
            (before, "examples/cluster".to_string())
        },
        &loaded,
    );

    let workload = big_workload(60, 600);
    check_charts_against_json(
        "a 60-node workload",
        async |sim| {
            let first = measured_phase(&workload).expect("measured ops");
            sim.run_workload_ops(&workload, 0..first)
                .await
                .expect("setup");
            let before = sim.node_usage();
            sim.run_workload_ops(&workload, first..workload.ops.len())
                .await
                .expect("run");
            (before, "big".to_string())
        },
        &kubesched_config::default_config(),
    );
}

/// On a cluster large enough that an attempt stops once it has found enough feasible
/// nodes (percentageOfNodesToScore), the report explains what the attempt examined and
/// counts the rest, instead of running Filter again over every node.
#[test]
fn a_large_cluster_is_explained_as_far_as_each_attempt_looked() {
    let (nodes, pods) = (400, 30);
    let workload = big_workload(nodes, pods);
    let data = kubesched_tests::with_simulation(
        &kubesched_config::default_config(),
        0,
        None,
        async |mut sim| {
            sim.condense_explanations();
            let first = measured_phase(&workload).expect("measured ops");
            sim.run_workload_ops(&workload, 0..first)
                .await
                .expect("setup");
            let before = sim.node_usage();
            sim.run_workload_ops(&workload, first..workload.ops.len())
                .await
                .expect("run");
            let explained = sim.take_explained();
            let mut report = sim.report();
            report.drop_timing();
            let title = title(&[], Some(&PathBuf::from("big.yaml")));
            ReportData::with_explained(&title, &report, &explained, &before, &sim.node_usage())
        },
    );
    let attempts: Vec<&AttemptSection> = data.sections.iter().flat_map(|s| &s.attempts).collect();
    assert!(!attempts.is_empty(), "explained");
    for a in &attempts {
        let rejected: usize = a.rejected.iter().map(|g| g.nodes).sum();
        assert_eq!(a.feasible + rejected + a.unexamined, nodes, "{a:?}");
        // 400 nodes at the adaptive percentage (50 - 400/125 = 47 %): 188 to find.
        assert_eq!(a.feasible, 188, "{a:?}");
        assert!(a.top.iter().all(|n| n.total_score.is_some()), "scored");
    }
    let html = render(&data);
    assert!(
        html.contains(
            "212 nodes not examined: the attempt stopped once it had found enough feasible nodes"
        ),
        "the page says what it left out"
    );
}
