//! The load benchmark (`kubesched bench --load`) end to end at CI size: a generated dump of
//! each shape loads whole and its pending pods are all scheduled.

use kubesched_sim::bench::dump::{DumpShape, DumpSpec, write_dump};
use kubesched_sim::bench::load::run_load;

// Links every in-tree plugin, as the binary has them.
use kubesched_tests as _;

#[test]
fn a_ci_size_dump_of_each_shape_loads_whole_and_its_pending_pods_are_scheduled() {
    let dir = std::env::temp_dir().join(format!("kubesched-load-bench-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 3,000 pods and 60 nodes: 3,060 documents, past the YAML parser's default budgets.
    let spec = DumpSpec {
        nodes: 60,
        pods: 3000,
        bound_percent: 90,
    };
    for shape in DumpShape::ALL {
        let path = dir.join(format!("dump-{}.{}", shape.name(), shape.extension()));
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        write_dump(&spec, shape, &mut file).unwrap();
        drop(file);
        let r = run_load(&path, shape.name()).unwrap();
        assert_eq!((r.nodes, r.pods, r.problems), (60, 3000, 0), "{r:?}");
        assert_eq!((r.pending, r.scheduled), (300, 300), "{r:?}");
        // Nothing on the way (loading, scheduling, binding, the report) keeps a pod's
        // object decoded: every pod, the 300 bound by the run too, is still packed.
        assert_eq!(r.packed_pods_at_end, 3000, "{r:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
