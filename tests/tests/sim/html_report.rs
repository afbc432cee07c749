//! `kubesched simulate --report FILE.html` on examples/cluster: the data the page is drawn
//! from (snapshot), that the page needs nothing outside itself, and, where Chromium is
//! installed (`.ci/run` installs it), a headless screenshot that shows the charts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kubesched_sim::html::{ReportData, render};
use kubesched_sim::{EXPLAIN_ALL, load_paths};
// Links every in-tree plugin into this test binary.
use kubesched_tests as _;

fn example_data() -> ReportData {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
    let (manifests, problems) = load_paths(std::slice::from_ref(&dir));
    assert!(problems.is_empty(), "{problems:?}");
    let loaded = match manifests.config.clone() {
        Some((file, text)) => kubesched_config::load_str(&text, &file).expect("valid config"),
        None => kubesched_config::default_config(),
    };
    kubesched_tests::with_simulation(&loaded, 0, Some(EXPLAIN_ALL), async |mut sim| {
        sim.load(manifests, "examples/cluster");
        let before = sim.node_usage();
        sim.settle().await;
        let report = sim.report();
        ReportData::new(
            "kubesched simulate examples/cluster",
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
            assert!(data.explanations.iter().any(|(id, _)| id == a), "{a}");
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
        ".explanations[][1].nodes" => "[nodes]",
        ".explanations[][1].preemption" => "[preemption]",
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
