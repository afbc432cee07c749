//! The resource-claim gate switches itself off once a plugin named DynamicResources is
//! registered (its own test binary, so the registration does not leak into other tests).

use std::collections::BTreeMap;
use std::sync::Arc;

use kubesched_framework::model::k8s_openapi::api::core::v1::PodResourceClaim;
use kubesched_framework::{
    CycleState, ExtensionPoint, Framework, Handle, PluginError, PluginRef, ProfileSpec,
    metrics::NoMetrics,
};
use kubesched_testing::PodBuilder;

struct FakeDra;

fn new_fake(_h: &Handle) -> Result<FakeDra, PluginError> {
    Ok(FakeDra)
}

kubesched_framework::register_plugin! {
    name: "DynamicResources",
    plugin: FakeDra,
    factory: new_fake,
}

#[test]
fn a_registered_dynamic_resources_plugin_turns_the_gate_off() {
    let spec = ProfileSpec {
        scheduler_name: "s".into(),
        plugins: BTreeMap::from([(ExtensionPoint::PreFilter, Vec::<PluginRef>::new())]),
        ..Default::default()
    };
    let fw = Framework::from_instances(
        spec,
        Handle::default(),
        Arc::new(NoMetrics),
        BTreeMap::new(),
        BTreeMap::new(),
    )
    .expect("valid");
    let pod = PodBuilder::new("gpu")
        .with(|p| {
            p.spec.get_or_insert_with(Default::default).resource_claims =
                Some(vec![PodResourceClaim {
                    name: "gpu".into(),
                    resource_claim_name: Some("c".into()),
                    ..Default::default()
                }])
        })
        .info();
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &pod, &[]);
    assert!(out.status.is_success(), "{:?}", out.status);
}
