//! A slim build: only NodeName is compiled in. The default profile keeps what exists, the
//! rest of upstream's defaults is reported absent, and naming a missing plugin is refused
//! with the Cargo feature that adds it.

mod common;

use kubesched_config::{DEFAULT_PLUGINS, default_config, to_yaml};
use kubesched_framework::ExtensionPoint;

use common::{HEADER, listing, load_err, load_ok};

fake_plugin!("NodeName", [Filter, EnqueueExtensions]);

// The binary offers these features (only plugin-node-name is on).
kubesched_framework::register_plugin_features!(
    "plugin-inter-pod-affinity",
    "plugin-node-name",
    "plugin-node-resources-fit",
);

#[test]
fn default_profile_uses_what_is_compiled_in() {
    let d = default_config();
    assert_eq!(listing(&d.profiles[0]), "Filter: NodeName");
    // Defaults whose gate is off by default (GenericWorkload's GangScheduling) are not missed.
    let gates = kubesched_config::FeatureGates::defaults();
    let want: Vec<&str> = DEFAULT_PLUGINS
        .iter()
        .filter(|p| p.gate.is_none_or(|g| gates.enabled(g)))
        .map(|p| p.name)
        .filter(|n| *n != "NodeName")
        .collect();
    assert_eq!(d.absent_default_plugins, want);
    let yaml = to_yaml(&d.config);
    assert!(!yaml.contains("pluginConfig"), "{yaml}");
    assert!(!yaml.contains("NodeResourcesFit"), "{yaml}");
    // The slim defaults round-trip as well.
    assert_eq!(load_ok(&yaml).config, d.config);
}

#[test]
fn issue_example_validates_in_a_slim_build() {
    let loaded = load_ok(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 16
leaderElection:
  leaderElect: true
  resourceLock: leases
  resourceNamespace: kube-system
  resourceName: myscheduler
profiles:
- schedulerName: myscheduler
  plugins:
    multiPoint:
      enabled:
      - name: NodeName
",
    );
    let spec = &loaded.profiles[0];
    assert_eq!(spec.scheduler_name, "myscheduler");
    assert_eq!(spec.at(ExtensionPoint::Filter).len(), 1);
    assert_eq!(listing(spec), "Filter: NodeName");
}

#[test]
fn missing_plugin_is_refused_with_its_feature() {
    let err = load_err(&format!(
        "{HEADER}profiles:
- plugins:
    score:
      enabled:
      - name: NodeResourcesFit
        weight: 2
  pluginConfig:
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 2
"
    ));
    assert_eq!(
        err,
        "sched.yaml: profiles[0].plugins.score.enabled[0].name: plugin \"NodeResourcesFit\" is not compiled into this binary; rebuild kubesched with the Cargo feature \"plugin-node-resources-fit\"
sched.yaml: profiles[0].pluginConfig[0].name: plugin \"InterPodAffinity\" is not compiled into this binary; rebuild kubesched with the Cargo feature \"plugin-inter-pod-affinity\""
    );
}

#[test]
fn disabling_an_absent_default_is_fine() {
    let loaded = load_ok(&format!(
        "{HEADER}profiles:
- plugins:
    multiPoint:
      disabled:
      - name: VolumeBinding
    filter:
      disabled:
      - name: NodeVolumeLimits
"
    ));
    assert_eq!(listing(&loaded.profiles[0]), "Filter: NodeName");
}
