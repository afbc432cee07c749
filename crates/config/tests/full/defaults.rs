//! Defaults: scalars, the default profile (ported from upstream's expanded v1 defaults),
//! default plugin args, the `config defaults` snapshot and its round trip, v1beta3 and JSON.

use std::time::Duration;

use kubesched_config::{
    API_VERSION_V1, DEFAULT_PLUGINS, KubeSchedulerConfiguration, PluginEntry, default_config,
    to_yaml,
};
use kubesched_framework::ExtensionPoint;
use serde_json::json;

use crate::common::{HEADER, InterPodAffinityArgs, listing, load_ok};

/// Upstream's default profile after multiPoint expansion (current upstream list: no cloud
/// volume limit plugins, SchedulingGates and DynamicResources on, NodeDeclaredFeatures
/// appended under its gate; DefaultPreemption holds back pods whose asynchronous preemption
/// runs, at PreEnqueue).
const EXPANDED_DEFAULTS: &str = "\
QueueSort: PrioritySort
PreEnqueue: SchedulingGates, DynamicResources, DefaultPreemption
PreFilter: NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity, DynamicResources, NodeDeclaredFeatures
Filter: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity, DynamicResources, NodeDeclaredFeatures
PostFilter: DynamicResources, DefaultPreemption
PreScore: TaintToleration, NodeAffinity, NodeResourcesFit, VolumeBinding, PodTopologySpread, InterPodAffinity, NodeResourcesBalancedAllocation
Score: TaintToleration:3, NodeAffinity:2, NodeResourcesFit:1, VolumeBinding:1, PodTopologySpread:2, InterPodAffinity:2, NodeResourcesBalancedAllocation:1, ImageLocality:1
Reserve: VolumeBinding, DynamicResources
PreBind: VolumeBinding, DynamicResources
Bind: DefaultBinder";

#[test]
fn default_profile_is_upstreams_expanded_default() {
    let d = default_config();
    assert_eq!(d.profiles.len(), 1);
    let spec = &d.profiles[0];
    assert_eq!(spec.scheduler_name, "default-scheduler");
    assert_eq!(listing(spec), EXPANDED_DEFAULTS);
    assert!(d.absent_default_plugins.is_empty());
    assert_eq!(spec.percentage_of_nodes_to_score, None);
    let with_args: Vec<&str> = spec.plugin_args.keys().map(String::as_str).collect();
    assert_eq!(
        with_args,
        ["DefaultPreemption", "InterPodAffinity", "NodeResourcesFit"]
    );
}

#[test]
fn node_declared_features_is_a_default_only_under_its_gate() {
    use kubesched_config::{FeatureGates, default_config_with_gates, load_str_with_gates};
    use kubesched_framework::Version;
    let names = |d: &kubesched_config::LoadedConfig| -> Vec<String> {
        d.config.profiles[0]
            .plugins
            .as_ref()
            .expect("defaulted plugins")
            .multi_point
            .enabled
            .iter()
            .map(|e| e.name.clone())
            .collect()
    };
    let v137 = default_config_with_gates(&FeatureGates::defaults());
    assert_eq!(
        names(&v137).last().map(String::as_str),
        Some("NodeDeclaredFeatures")
    );
    // Beta and on in v1.36; alpha and off in v1.35; not there at all in v1.34.
    for (minor, want) in [(36, true), (35, false), (34, false)] {
        let gates = FeatureGates::parse_at(Version::new(1, minor), std::iter::empty::<&str>())
            .expect("gates");
        let d = default_config_with_gates(&gates);
        assert_eq!(
            names(&d).iter().any(|n| n == "NodeDeclaredFeatures"),
            want,
            "v1.{minor}"
        );
        assert!(d.absent_default_plugins.is_empty(), "v1.{minor}");
        assert_eq!(d.feature_gates.version(), Version::new(1, minor));
        let spec = &d.profiles[0];
        assert_eq!(spec.plugin_names().contains("NodeDeclaredFeatures"), want);
        // A file read under the same gates gets the same defaults.
        let loaded = load_str_with_gates(HEADER, "test", &gates).expect("loads");
        assert_eq!(loaded.config, d.config, "v1.{minor}");
    }
    // v1.35 with the alpha gate turned on adds it again.
    let on = FeatureGates::parse_at(Version::V1_35, ["NodeDeclaredFeatures=true"]).expect("gates");
    assert!(names(&default_config_with_gates(&on)).contains(&"NodeDeclaredFeatures".to_string()));
}

#[test]
fn default_multi_point_lists_every_default_in_order() {
    let d = default_config();
    let plugins = d.config.profiles[0]
        .plugins
        .clone()
        .expect("defaulted plugins");
    // The defaults whose gate is on by default (GenericWorkload's GangScheduling is off).
    let gates = kubesched_config::FeatureGates::defaults();
    let want: Vec<PluginEntry> = DEFAULT_PLUGINS
        .iter()
        .filter(|p| p.gate.is_none_or(|g| gates.enabled(g)))
        .map(|p| PluginEntry {
            name: p.name.to_string(),
            weight: p.weight,
        })
        .collect();
    assert_eq!(plugins.multi_point.enabled, want);
    assert!(plugins.multi_point.disabled.is_empty());
    assert!(plugins.score.is_empty() && plugins.filter.is_empty());
}

#[test]
fn scalar_defaults_match_upstream() {
    let c = load_ok(HEADER).config;
    assert_eq!(c.api_version, API_VERSION_V1);
    assert_eq!(c.parallelism, 16);
    assert_eq!(c.percentage_of_nodes_to_score, 0);
    assert_eq!(c.pod_initial_backoff_seconds, 1);
    assert_eq!(c.pod_max_backoff_seconds, 10);
    let le = &c.leader_election;
    assert!(le.leader_elect);
    assert_eq!(le.resource_lock, "leases");
    assert_eq!(le.resource_namespace, "kube-system");
    assert_eq!(le.resource_name, "kube-scheduler");
    assert_eq!(le.lease_duration, Duration::from_secs(15));
    assert_eq!(le.renew_deadline, Duration::from_secs(10));
    assert_eq!(le.retry_period, Duration::from_secs(2));
    let cc = &c.client_connection;
    assert_eq!(cc.qps, 50.0);
    assert_eq!(cc.burst, 100);
    assert_eq!(cc.content_type, "application/vnd.kubernetes.protobuf");
    assert!(!c.delay_cache_until_active);
    assert!(c.enable_profiling);
    assert_eq!(c.enable_contention_profiling, Some(true));
    assert_eq!(c.profiles.len(), 1);
    assert_eq!(c.profiles[0].scheduler_name, "default-scheduler");
    // An empty file section decodes to exactly what default_config() holds.
    assert_eq!(c, default_config().config);
}

#[test]
fn explicit_values_are_kept() {
    let c = load_ok(&format!(
        "{HEADER}parallelism: 8
percentageOfNodesToScore: 40
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 30
delayCacheUntilActive: true
enableProfiling: false
leaderElection:
  leaderElect: false
  leaseDuration: 1m
  renewDeadline: 45s
  retryPeriod: 500ms
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 20.5
  burst: 40
  contentType: application/json
  acceptContentTypes: application/json
"
    ))
    .config;
    assert_eq!(c.parallelism, 8);
    assert_eq!(c.percentage_of_nodes_to_score, 40);
    assert_eq!(c.pod_initial_backoff_seconds, 2);
    assert_eq!(c.pod_max_backoff_seconds, 30);
    assert!(c.delay_cache_until_active);
    assert!(!c.enable_profiling);
    assert_eq!(c.enable_contention_profiling, Some(false));
    assert!(!c.leader_election.leader_elect);
    assert_eq!(c.leader_election.lease_duration, Duration::from_secs(60));
    assert_eq!(c.leader_election.renew_deadline, Duration::from_secs(45));
    assert_eq!(c.leader_election.retry_period, Duration::from_millis(500));
    assert_eq!(
        c.client_connection.kubeconfig,
        "/etc/kubernetes/scheduler.conf"
    );
    assert_eq!(c.client_connection.qps, 20.5);
    assert_eq!(c.client_connection.burst, 40);
    assert_eq!(c.client_connection.content_type, "application/json");
}

/// The configuration of issue 2 validates and keeps every default plugin (NodeName is a
/// default, so naming it in multiPoint re-configures it in place).
#[test]
fn issue_example_validates() {
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
    assert_eq!(loaded.config.leader_election.resource_name, "myscheduler");
    assert_eq!(loaded.profiles.len(), 1);
    let spec = loaded.profile("myscheduler").expect("profile by name");
    assert_eq!(listing(spec), EXPANDED_DEFAULTS);
}

#[test]
fn defaults_snapshot() {
    insta::assert_snapshot!("config_defaults", to_yaml(&default_config().config));
}

#[test]
fn defaults_round_trip() {
    let d = default_config();
    let again = load_ok(&to_yaml(&d.config));
    assert_eq!(again.config, d.config);
    assert_eq!(again.profiles[0].plugins, d.profiles[0].plugins);
    assert_eq!(to_yaml(&again.config), to_yaml(&d.config));
}

#[test]
fn customised_config_round_trips() {
    let yaml = format!(
        "{HEADER}parallelism: 4
leaderElection:
  leaderElect: false
profiles:
- schedulerName: a
  percentageOfNodesToScore: 30
  plugins:
    multiPoint:
      enabled:
      - name: ScorePlugin1
        weight: 4
      disabled:
      - name: ImageLocality
    score:
      enabled:
      - name: NodeResourcesFit
        weight: 5
    filter:
      disabled:
      - name: '*'
      enabled:
      - name: NodeName
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 3
- schedulerName: b
extenders:
- urlPrefix: http://127.0.0.1:8888/
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 2
  httpTimeout: 1m30s
  managedResources:
  - name: example.com/gpu
    ignoredByScheduler: true
"
    );
    let first = load_ok(&yaml);
    let second = load_ok(&to_yaml(&first.config));
    assert_eq!(second.config, first.config);
    assert_eq!(second.profiles, first.profiles);
    assert_eq!(
        first.config.extenders[0].http_timeout,
        Duration::from_secs(90)
    );
}

#[test]
fn plugin_args_are_defaulted_and_given_to_the_framework() {
    let loaded = load_ok(&format!(
        "{HEADER}profiles:
- pluginConfig:
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 5
"
    ));
    let profile = &loaded.config.profiles[0];
    let names: Vec<&str> = profile
        .plugin_config
        .iter()
        .map(|pc| pc.name.as_str())
        .collect();
    // The user's entry first, then the defaults of enabled plugins with args, sorted by name.
    assert_eq!(
        names,
        ["InterPodAffinity", "DefaultPreemption", "NodeResourcesFit"]
    );
    assert_eq!(
        profile.plugin_config[0].args,
        Some(json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "InterPodAffinityArgs",
            "hardPodAffinityWeight": 5,
            "ignorePreferredTermsOfExistingPods": false,
        }))
    );
    assert_eq!(
        profile.plugin_config[1].args,
        Some(json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "DefaultPreemptionArgs",
            "minCandidateNodesPercentage": 10,
            "minCandidateNodesAbsolute": 100,
        }))
    );
    // The framework gets the same args the defaulted configuration shows.
    let spec = &loaded.profiles[0];
    assert_eq!(
        spec.plugin_args
            .get("InterPodAffinity")
            .and_then(|a| a.effective.as_ref()),
        profile.plugin_config[0].args.as_ref()
    );
    // ... decoded, typed, for the factory.
    let typed = spec.plugin_args["InterPodAffinity"]
        .get::<InterPodAffinityArgs>()
        .expect("typed InterPodAffinityArgs");
    assert_eq!(typed.hard_pod_affinity_weight, 5);
    assert_eq!(spec.plugin_args.len(), 3);
}

#[test]
fn disabled_default_gets_no_default_args() {
    let loaded = load_ok(&format!(
        "{HEADER}profiles:
- plugins:
    multiPoint:
      disabled:
      - name: NodeResourcesFit
"
    ));
    let profile = &loaded.config.profiles[0];
    assert!(
        profile
            .plugin_config
            .iter()
            .all(|pc| pc.name != "NodeResourcesFit")
    );
    assert!(
        !loaded.profiles[0]
            .plugin_names()
            .contains("NodeResourcesFit")
    );
}

#[test]
fn v1beta3_is_read_with_the_same_shape() {
    let body = "profiles:
- schedulerName: beta
  plugins:
    score:
      enabled:
      - name: ImageLocality
        weight: 7
leaderElection:
  leaseDuration: 20s
";
    let beta = load_ok(&format!(
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n{body}"
    ));
    let v1 = load_ok(&format!("{HEADER}{body}"));
    assert_eq!(beta.config.api_version, API_VERSION_V1);
    assert_eq!(beta.config, v1.config);
    assert_eq!(beta.profiles, v1.profiles);
    // kube-scheduler v1.34 refuses v1beta3: kubesched reads it but says so.
    assert_eq!(
        beta.warnings,
        [
            "sched.yaml: apiVersion: kubescheduler.config.k8s.io/v1beta3 was removed in Kubernetes v1.29 and kube-scheduler v1.34 refuses it; kubesched still reads it as kubescheduler.config.k8s.io/v1 (`kubesched config migrate FILE` prints the kubescheduler.config.k8s.io/v1 file)"
        ]
    );
    assert!(v1.warnings.is_empty(), "{:?}", v1.warnings);
    assert!(
        beta.profiles[0]
            .at(ExtensionPoint::Score)
            .iter()
            .any(|r| r.name == "ImageLocality" && r.weight == 7)
    );
}

#[test]
fn migrate_writes_v1_that_loads_to_the_same_configuration() {
    let beta = "apiVersion: kubescheduler.config.k8s.io/v1beta3
kind: KubeSchedulerConfiguration
parallelism: 8
leaderElection:
  leaderElect: false
profiles:
- schedulerName: beta
  plugins:
    score:
      enabled:
      - name: ImageLocality
        weight: 7
  pluginConfig:
  - name: DefaultPreemption
    args:
      apiVersion: kubescheduler.config.k8s.io/v1beta3
      kind: DefaultPreemptionArgs
      minCandidateNodesAbsolute: 50
";
    let migrated = kubesched_config::migrate_to_v1(beta, "beta.yaml").expect("migrates");
    assert!(
        migrated.starts_with(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        ),
        "{migrated}"
    );
    assert!(!migrated.contains("v1beta3"), "{migrated}");
    let before = load_ok(beta);
    let after = load_ok(&migrated);
    assert_eq!(after.config, before.config);
    assert_eq!(after.profiles, before.profiles);
    assert!(after.warnings.is_empty(), "{:?}", after.warnings);
    // A v1 file migrates to itself (up to key order), and migrating twice changes nothing.
    assert_eq!(
        kubesched_config::migrate_to_v1(&migrated, "again.yaml").expect("migrates"),
        migrated
    );
    // A broken file is refused with the loader's error.
    let err = kubesched_config::migrate_to_v1(
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\nparallelism: -1\n",
        "bad.yaml",
    )
    .expect_err("invalid");
    assert!(err.to_string().contains("bad.yaml"), "{err}");
    assert!(err.to_string().contains("parallelism"), "{err}");
}

#[test]
fn settings_without_effect_draw_a_warning() {
    let loaded = load_ok(&format!(
        "{HEADER}enableProfiling: true
clientConnection:
  contentType: application/cbor
  acceptContentTypes: application/vnd.kubernetes.protobuf,application/json
"
    ));
    assert_eq!(
        loaded.warnings,
        [
            "sched.yaml: clientConnection.contentType: kubesched sends application/json to the API server: \"application/cbor\" has no effect",
            "sched.yaml: clientConnection.acceptContentTypes: kubesched accepts only application/json from the API server: \"application/vnd.kubernetes.protobuf,application/json\" has no effect",
        ]
    );
    // Upstream's defaults, as `config defaults` writes them, draw nothing.
    let defaults = load_ok(&format!(
        "{HEADER}enableContentionProfiling: true
clientConnection:
  contentType: application/vnd.kubernetes.protobuf
"
    ));
    assert!(defaults.warnings.is_empty(), "{:?}", defaults.warnings);
    let written = kubesched_config::to_yaml(&kubesched_config::default_config().config);
    let reloaded = load_ok(&written);
    assert!(reloaded.warnings.is_empty(), "{:?}", reloaded.warnings);
    // What kubesched does anyway draws nothing (it serves /debug/pprof/profile when
    // profiling is on); neither do the defaults.
    let fine = load_ok(&format!(
        "{HEADER}enableProfiling: true
clientConnection:
  contentType: application/json
  acceptContentTypes: application/json
"
    ));
    assert!(fine.warnings.is_empty(), "{:?}", fine.warnings);
    assert!(load_ok(HEADER).warnings.is_empty());
}

#[test]
fn json_is_read_too() {
    let loaded = load_ok(
        r#"{
  "apiVersion": "kubescheduler.config.k8s.io/v1",
  "kind": "KubeSchedulerConfiguration",
  "parallelism": 3,
  "leaderElection": {"leaderElect": false},
  "profiles": [{"schedulerName": "json-scheduler"}]
}"#,
    );
    assert_eq!(loaded.config.parallelism, 3);
    assert_eq!(loaded.profiles[0].scheduler_name, "json-scheduler");
    assert_eq!(listing(&loaded.profiles[0]), EXPANDED_DEFAULTS);
}

#[test]
fn several_profiles_keep_their_names_and_percentages() {
    let loaded = load_ok(&format!(
        "{HEADER}percentageOfNodesToScore: 50
profiles:
- schedulerName: one
- schedulerName: two
  percentageOfNodesToScore: 20
"
    ));
    let names: Vec<&str> = loaded
        .profiles
        .iter()
        .map(|p| p.scheduler_name.as_str())
        .collect();
    assert_eq!(names, ["one", "two"]);
    assert_eq!(loaded.profiles[0].percentage_of_nodes_to_score, None);
    assert_eq!(loaded.profiles[1].percentage_of_nodes_to_score, Some(20));
    assert_eq!(loaded.config.percentage_of_nodes_to_score, 50);
}

#[test]
fn load_file_names_the_file() {
    let dir = std::env::temp_dir().join(format!("kubesched-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let good = dir.join("good.yaml");
    std::fs::write(&good, HEADER).expect("write");
    let loaded = kubesched_config::load_file(&good).expect("loads");
    assert_eq!(loaded.config, default_config().config);

    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, format!("{HEADER}parallelism: 0\n")).expect("write");
    let err = kubesched_config::load_file(&bad)
        .expect_err("refused")
        .to_string();
    assert!(
        err.starts_with(&format!("{}: parallelism: ", bad.display())),
        "{err}"
    );

    let missing = dir.join("missing.yaml");
    let err = kubesched_config::load_file(&missing)
        .expect_err("refused")
        .to_string();
    assert!(err.starts_with(&missing.display().to_string()), "{err}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn default_struct_is_an_empty_file() {
    // What serde gives for a document with only the header equals the Default impl.
    let parsed: KubeSchedulerConfiguration = serde_json::from_value(json!({})).expect("decodes");
    assert_eq!(parsed, KubeSchedulerConfiguration::default());
}
