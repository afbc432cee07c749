//! The plugin set of this build: one line per plugin crate, each behind its Cargo feature.
//!
//! rustc links no crate that no source line names, so a Cargo dependency alone registers
//! nothing; these `use … as _;` lines are what pull each enabled plugin's link-time
//! registration into the binary. This file is the only place the feature-to-crate mapping
//! is written (a test checks every crate under plugins/ has its feature and its line).
//! It must hold nothing else.

#[cfg(feature = "plugin-coscheduling")]
use kubesched_plugin_coscheduling as _;
#[cfg(feature = "plugin-default-binder")]
use kubesched_plugin_default_binder as _;
#[cfg(feature = "plugin-default-preemption")]
use kubesched_plugin_default_preemption as _;
#[cfg(feature = "plugin-dynamic-resources")]
use kubesched_plugin_dynamic_resources as _;
#[cfg(feature = "plugin-gang-scheduling")]
use kubesched_plugin_gang_scheduling as _;
#[cfg(feature = "plugin-hint-node")]
use kubesched_plugin_hint_node as _;
#[cfg(feature = "plugin-image-locality")]
use kubesched_plugin_image_locality as _;
#[cfg(feature = "plugin-inter-pod-affinity")]
use kubesched_plugin_inter_pod_affinity as _;
#[cfg(feature = "plugin-node-affinity")]
use kubesched_plugin_node_affinity as _;
#[cfg(feature = "plugin-node-declared-features")]
use kubesched_plugin_node_declared_features as _;
#[cfg(feature = "plugin-node-name")]
use kubesched_plugin_node_name as _;
#[cfg(feature = "plugin-node-ports")]
use kubesched_plugin_node_ports as _;
#[cfg(feature = "plugin-node-resources-balanced-allocation")]
use kubesched_plugin_node_resources_balanced_allocation as _;
#[cfg(feature = "plugin-node-resources-fit")]
use kubesched_plugin_node_resources_fit as _;
#[cfg(feature = "plugin-node-unschedulable")]
use kubesched_plugin_node_unschedulable as _;
#[cfg(feature = "plugin-node-volume-limits")]
use kubesched_plugin_node_volume_limits as _;
#[cfg(feature = "plugin-pod-topology-spread")]
use kubesched_plugin_pod_topology_spread as _;
#[cfg(feature = "plugin-priority-sort")]
use kubesched_plugin_priority_sort as _;
#[cfg(feature = "plugin-scheduling-gates")]
use kubesched_plugin_scheduling_gates as _;
#[cfg(feature = "plugin-selector-spread")]
use kubesched_plugin_selector_spread as _;
#[cfg(feature = "plugin-taint-toleration")]
use kubesched_plugin_taint_toleration as _;
#[cfg(feature = "plugin-volume-binding")]
use kubesched_plugin_volume_binding as _;
#[cfg(feature = "plugin-volume-restrictions")]
use kubesched_plugin_volume_restrictions as _;
#[cfg(feature = "plugin-volume-zone")]
use kubesched_plugin_volume_zone as _;
#[cfg(feature = "plugin-wasm")]
use kubesched_plugin_wasm as _;
