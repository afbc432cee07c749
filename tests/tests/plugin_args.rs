//! Every plugin linked into the binary gets the same args check: its defaults decode back to
//! themselves, and unknown fields are refused (kubesched_testing::assert_args_codec).

use kubesched_framework::registry;
// The binary's plugin set, linked in through the scenario helpers.
use kubesched_tests as _;

#[test]
fn every_registered_plugin_has_a_strict_args_codec_whose_defaults_are_a_fixed_point() {
    let plugins = registry::plugins();
    assert!(
        plugins.len() >= 18,
        "the default plugins are linked: {}",
        plugins.len()
    );
    for desc in plugins {
        kubesched_testing::assert_args_codec(desc.name);
    }
}
