//! Helpers for kubesched's cross-crate scenario tests: run a simulation of manifests or a
//! workload with every in-tree plugin linked in. Nothing here is used by the scheduler.

use kubesched::framework as _;

pub mod apiserver;
pub mod extender;
pub mod schema;
use kubesched_config::LoadedConfig;
use kubesched_sim::{Manifests, SimReport, Simulation, SimulationOptions, Workload};

/// Builds a simulation of `config` (seeded, explaining `explain` if given) on a
/// current-thread runtime and hands it to `body`: the frame every simulation test shares.
pub fn with_simulation<T>(
    config: &LoadedConfig,
    seed: u64,
    explain: Option<&str>,
    body: impl AsyncFnOnce(Simulation) -> T,
) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let sim = Simulation::new(
            config,
            SimulationOptions {
                seed: Some(seed),
                explain: explain.map(str::to_string),
                progress: None,
            },
        )
        .expect("simulation");
        body(sim).await
    })
}

/// Parses manifests (YAML text, named `input.yaml` in messages); a test's input must be clean.
pub fn manifests_of(text: &str) -> Manifests {
    let mut m = Manifests::default();
    let mut problems = Vec::new();
    kubesched_sim::load_text(text, "input.yaml", &mut m, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    m
}

/// Runs manifests (YAML text) under a configuration (None: defaults) and returns the report.
/// Problems in the manifests are reported, not fatal, as `kubesched simulate` treats them.
pub fn simulate_text(
    manifests: &str,
    config: Option<&str>,
    seed: u64,
    explain: Option<&str>,
) -> SimReport {
    let loaded = match config {
        Some(c) => kubesched_config::load_str(c, "config.yaml").expect("valid config"),
        None => kubesched_config::default_config(),
    };
    with_simulation(&loaded, seed, explain, async |mut sim| {
        let mut m = Manifests::default();
        let mut problems = Vec::new();
        kubesched_sim::load_text(manifests, "input.yaml", &mut m, &mut problems);
        sim.add_problems(problems);
        sim.load(m, "input.yaml");
        sim.settle().await;
        sim.report()
    })
}

/// Runs a workload (YAML text) and returns the report, or the run's error.
pub fn simulate_workload(workload: &str, seed: u64) -> Result<SimReport, String> {
    let loaded = kubesched_config::default_config();
    let w = Workload::from_str(workload, "workload.yaml").map_err(|e| e.to_string())?;
    with_simulation(&loaded, seed, None, async |mut sim| {
        sim.run_workload(&w).await.map_err(|e| e.to_string())?;
        Ok(sim.report())
    })
}
