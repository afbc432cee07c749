//! The bundled examples, end to end: their table and JSON output are snapshot-tested so a
//! change in any decision or message shows up in review.

use std::path::PathBuf;

use kubesched_sim::{SimReport, Simulation, SimulationOptions, load_paths};
// Links every in-tree plugin into this test binary.
use kubesched_tests as _;

fn example_report(explain: Option<&str>) -> SimReport {
    run_example("cluster", explain)
}

fn run_example(name: &str, explain: Option<&str>) -> SimReport {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let (manifests, problems) = load_paths(&[dir]);
    let loaded = match manifests.config.clone() {
        Some((file, text)) => {
            kubesched_config::load_str(&text, &file).expect("valid example config")
        }
        None => kubesched_config::default_config(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut sim = Simulation::new(
            &loaded,
            SimulationOptions {
                seed: Some(0),
                explain: explain.map(str::to_string),
                progress: None,
            },
        )
        .expect("simulation");
        sim.add_problems(problems);
        sim.load(manifests, name);
        sim.settle().await;
        sim.report()
    })
}

#[test]
fn example_cluster_table() {
    let report = example_report(None);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
}

#[test]
fn example_cluster_json() {
    let report = example_report(None);
    insta::assert_json_snapshot!(report, {
        ".summary.duration_seconds" => "[duration]",
        ".summary.pods_per_second" => "[rate]",
        ".summary.latency_ms_p50" => "[latency]",
        ".summary.latency_ms_p99" => "[latency]",
    });
}

#[test]
fn example_cluster_explain() {
    let report = example_report(Some("shop/report"));
    insta::assert_yaml_snapshot!(report.explanations);
}

#[test]
fn spread_and_affinity_example_table() {
    let report = run_example("spread", None);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
}

#[test]
fn volumes_example_table_and_explain() {
    let report = run_example("volumes", Some("shop/db-0"));
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
    insta::assert_yaml_snapshot!(report.explanations);
}

/// The example extender (examples/extender) behind the example scenario's configuration,
/// as the README runs them in two terminals.
#[test]
fn example_extender_scenario() {
    let ext = kubesched_tests::extender::ExtenderServer::start_router(
        kubesched_example_extender::router(),
        "/",
    );
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/extender/scenario");
    let (manifests, problems) = load_paths(&[dir]);
    assert!(problems.is_empty(), "{problems:?}");
    let (file, text) = manifests
        .config
        .clone()
        .expect("the scenario has a configuration");
    assert!(text.contains("urlPrefix: http://127.0.0.1:8888/"), "{text}");
    // The extender listens on a free port here rather than 8888.
    let text = text.replace("http://127.0.0.1:8888/", &format!("{}/", ext.url()));
    let loaded = kubesched_config::load_str(&text, &file).expect("valid example config");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let report = runtime.block_on(async {
        let mut sim = Simulation::new(
            &loaded,
            SimulationOptions {
                seed: Some(0),
                explain: Some("default/batch".into()),
                progress: None,
            },
        )
        .expect("simulation");
        sim.load(manifests, "extender");
        sim.settle().await;
        sim.report()
    });
    let node_of = |name: &str| {
        report
            .pods
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.node.clone())
    };
    assert_eq!(node_of("web-1").as_deref(), Some("node-cheap"));
    assert_eq!(node_of("web-2").as_deref(), Some("node-cheap"));
    assert_eq!(node_of("batch").as_deref(), Some("node-pricey"));
    let maint = report.explanations[0]
        .nodes
        .iter()
        .find(|n| n.node == "node-maint")
        .expect("node-maint");
    assert_eq!(maint.rejected_by.as_deref(), Some("Extender"));
    assert_eq!(
        maint.reasons,
        [kubesched_example_extender::MAINTENANCE_REASON]
    );
}
