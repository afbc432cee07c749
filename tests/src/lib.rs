//! Helpers for kubesched's cross-crate scenario tests: run a simulation of manifests or a
//! workload with every in-tree plugin linked in. Nothing here is used by the scheduler.

use kubesched::framework as _;

pub mod apiserver;
pub mod extender;
pub mod schema;
use kubesched_sim::{SimReport, Simulation, SimulationOptions, Workload};

/// Runs manifests (YAML text) under a configuration (None: defaults) and returns the report.
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut sim = Simulation::new(
            &loaded,
            SimulationOptions {
                seed: Some(seed),
                explain: explain.map(str::to_string),
                progress: None,
            },
        )
        .expect("simulation");
        let mut m = kubesched_sim::Manifests::default();
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut sim = Simulation::new(
            &loaded,
            SimulationOptions {
                seed: Some(seed),
                explain: None,
                progress: None,
            },
        )
        .map_err(|e| e.to_string())?;
        sim.run_workload(&w).await.map_err(|e| e.to_string())?;
        Ok(sim.report())
    })
}
