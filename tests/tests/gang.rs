//! Gang scheduling with Coscheduling (an opt-in plugin, linked into this test binary only):
//! examples/gang end to end in simulate. The gang of 8 fits only whole and is bound whole,
//! the later gang waits with the group's rejection, the incomplete one is held back at
//! PreEnqueue, and the PodGroups' status shows what the scheduler saw.

use std::path::PathBuf;

use kubesched_plugin_coscheduling::{PodGroup, phase};
use kubesched_sim::{PodState, SimReport, Simulation, SimulationOptions, load_paths};
// Links every in-tree plugin, and Coscheduling, into this test binary.
use kubesched_plugin_coscheduling as _;
use kubesched_tests as _;

fn run_gang_example() -> (SimReport, Simulation) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/gang");
    let (manifests, problems) = load_paths(&[dir]);
    assert!(problems.is_empty(), "{problems:?}");
    let (file, text) = manifests.config.clone().expect("the example has a config");
    let loaded = kubesched_config::load_str(&text, &file).expect("valid example config");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut sim = Simulation::new(
            &loaded,
            SimulationOptions {
                seed: Some(0),
                explain: None,
                progress: None,
            },
        )
        .expect("simulation");
        sim.load(manifests, "gang");
        sim.settle().await;
        (sim.report(), sim)
    })
}

#[test]
fn a_gang_is_bound_whole_and_the_next_one_waits() {
    let (report, sim) = run_gang_example();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
    let state = |name: &str| {
        report
            .pods
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} reported"))
            .status
    };
    for i in 0..8 {
        assert_eq!(
            state(&format!("train-{i}")),
            PodState::Scheduled,
            "train-{i}"
        );
    }
    for i in 0..4 {
        assert_ne!(state(&format!("eval-{i}")), PodState::Scheduled, "eval-{i}");
    }
    for i in 0..2 {
        assert_ne!(
            state(&format!("sweep-{i}")),
            PodState::Scheduled,
            "sweep-{i}"
        );
    }

    let groups = sim.cluster().objects().of::<PodGroup>();
    let phase_of = |name: &str| {
        groups
            .get(Some("ml"), name)
            .and_then(|g| g.status.clone())
            .and_then(|s| s.phase)
    };
    assert_eq!(phase_of("train").as_deref(), Some(phase::SCHEDULING));
    assert_eq!(phase_of("sweep").as_deref(), Some(phase::PENDING));
}
