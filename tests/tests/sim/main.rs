//! The in-memory cluster's tests, one binary: each module was its own test binary once, and
//! linking a dozen copies of the whole scheduler cost minutes of a cold build and gigabytes of
//! disk. Test plugins registered by a module (fidelity's, scheduling_loop's, plugin_kinds')
//! are linked into every module here, but no profile names them except their own tests'.
//!
//! Tests that need a process of their own stay apart: the cluster-mode tests (kube_*, run
//! one by one by `cargo xtask stress`), gang.rs (it links the opt-in Coscheduling plugin),
//! kube_malformed (a global log subscriber) and kube_faults/kube_leader (they re-run their
//! own binary).

mod bad_input;
mod bench_workloads;
mod examples;
mod extenders;
mod fidelity;
mod gang_workload;
mod html_report;
mod load_bench;
mod node_declared_features;
mod plugin_kinds;
mod preemption_report;
mod scenarios;
mod scheduling_loop;
mod topology_placement;
mod volume_binding;
mod what_if;
