//! `kubesched simulate --report FILE.html` on examples/cluster: the data the page is drawn
//! from (snapshot), that the page needs nothing outside itself, and, where Chromium is
//! installed (`.ci/run` installs it), a headless screenshot that shows the charts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kubesched_sim::html::{ReportData, measured_phase, render, title};
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
    let workload = big_workload(nodes, pods);
    let path = PathBuf::from("big.yaml");
    let data = kubesched_tests::with_simulation(
        &kubesched_config::default_config(),
        0,
        Some(EXPLAIN_ALL),
        async |mut sim| {
            // As `simulate --workload --report` does: "before" when the measured pods begin.
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
    );
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

fn screenshot(browser: &Path, page: &Path, png: &Path, profile: &Path) -> Result<(), String> {
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
            "--window-size=1200,1500",
        ])
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
    let page = dir.join("report.html");
    let png = dir.join("report.png");
    std::fs::write(&page, render(&example_data())).expect("page written");
    screenshot(&browser, &page, &png, &dir.join("profile")).expect("screenshot");

    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png).expect("png"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut buf).expect("a frame");
    let (w, h) = (frame.width as usize, frame.height as usize);
    assert_eq!((w, h), (1200, 1500));
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
        "mostly blank: {not_white} of {total}"
    );
    assert!(
        after_bars > 2000,
        "utilisation bars not drawn: {after_bars} pixels"
    );
    assert!(
        reason_bars > 2000,
        "reason bars not drawn: {reason_bars} pixels"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
