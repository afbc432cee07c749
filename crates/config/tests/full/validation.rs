//! One row per rule: a document in, the error line (file, field path, problem) out.

use crate::common::{HEADER, load, load_err};

/// Checks that `body` (after the header) is refused with a line containing `want`.
#[track_caller]
fn check(body: &str, want: &str) {
    let err = load_err(&format!("{HEADER}{body}"));
    assert!(
        err.lines().any(|l| l.contains(want)),
        "expected a line containing\n  {want}\ngot\n{err}"
    );
}

#[test]
fn global_scalars() {
    let rows = [
        (
            "parallelism: 0\n",
            "sched.yaml: parallelism: should be an integer value greater than zero, got 0",
        ),
        (
            "parallelism: -3\n",
            "sched.yaml: parallelism: should be an integer value greater than zero",
        ),
        (
            "percentageOfNodesToScore: 101\n",
            "sched.yaml: percentageOfNodesToScore: not in valid range [0-100], got 101",
        ),
        (
            "percentageOfNodesToScore: -1\n",
            "sched.yaml: percentageOfNodesToScore: not in valid range [0-100]",
        ),
        (
            "podInitialBackoffSeconds: 0\n",
            "sched.yaml: podInitialBackoffSeconds: must be greater than 0",
        ),
        (
            "podInitialBackoffSeconds: 10\npodMaxBackoffSeconds: 5\n",
            "sched.yaml: podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds (10), got 5",
        ),
        (
            "clientConnection:\n  burst: -1\n",
            "sched.yaml: clientConnection.burst: must be non-negative",
        ),
        (
            "clientConnection:\n  qps: -5\n",
            "sched.yaml: clientConnection.qps: must be a non-negative number",
        ),
    ];
    for (body, want) in rows {
        check(body, want);
    }
}

#[test]
fn leader_election() {
    let rows = [
        (
            "leaderElection:\n  leaseDuration: 5s\n",
            "sched.yaml: leaderElection.leaseDuration: must be greater than renewDeadline (10s), got 5s",
        ),
        (
            "leaderElection:\n  leaseDuration: 10s\n",
            "leaderElection.leaseDuration: must be greater than renewDeadline",
        ),
        (
            "leaderElection:\n  renewDeadline: 2s\n",
            "sched.yaml: leaderElection.renewDeadline: must be greater than retryPeriod × 1.2 (2.4s), got 2s",
        ),
        (
            "leaderElection:\n  resourceLock: endpoints\n",
            "sched.yaml: leaderElection.resourceLock: resourceLock value must be \"leases\"",
        ),
    ];
    for (body, want) in rows {
        check(body, want);
    }
}

#[test]
fn leader_election_rules_apply_only_when_electing() {
    let loaded = load(&format!(
        "{HEADER}leaderElection:\n  leaderElect: false\n  leaseDuration: 1s\n  resourceLock: endpoints\n"
    ));
    assert!(loaded.is_ok(), "{:?}", loaded.err().map(|e| e.to_string()));
}

#[test]
fn profiles() {
    let rows = [
        (
            "profiles:\n- schedulerName: a\n- {}\n",
            "sched.yaml: profiles[1].schedulerName: required value",
        ),
        (
            "profiles:\n- schedulerName: a\n- schedulerName: b\n- schedulerName: a\n",
            "sched.yaml: profiles[2].schedulerName: duplicate value \"a\" (also profiles[0].schedulerName)",
        ),
        (
            "profiles:\n- percentageOfNodesToScore: 120\n",
            "sched.yaml: profiles[0].percentageOfNodesToScore: not in valid range [0-100], got 120",
        ),
        (
            "profiles:
- schedulerName: a
- schedulerName: b
  plugins:
    queueSort:
      enabled:
      - name: QueueSortPlugin
      disabled:
      - name: PrioritySort
",
            "sched.yaml: profiles[1].plugins.queueSort: must be the same for all profiles",
        ),
        (
            "profiles:
- plugins:
    queueSort:
      enabled:
      - name: QueueSortPlugin
",
            "sched.yaml: profiles[0].plugins.queueSort: only one queue sort plugin required for profile with scheduler name \"default-scheduler\", but got 2",
        ),
        // What upstream's framework refuses at start: no QueueSort, no Bind plugin.
        (
            "profiles:
- schedulerName: bare
  plugins:
    multiPoint:
      disabled:
      - name: '*'
    queueSort:
      disabled:
      - name: '*'
",
            "sched.yaml: profiles[0].plugins.queueSort: only one queue sort plugin required for profile with scheduler name \"bare\", but got 0",
        ),
        (
            "profiles:
- schedulerName: unbound
  plugins:
    bind:
      disabled:
      - name: DefaultBinder
",
            "sched.yaml: profiles[0].plugins.bind: at least one bind plugin is needed for profile with scheduler name \"unbound\"",
        ),
    ];
    for (body, want) in rows {
        check(body, want);
    }
}

#[test]
fn plugin_entries() {
    let rows = [
        (
            "profiles:
- plugins:
    score:
      enabled:
      - name: ImageLocality
        weight: 2
      - name: NodeResourcesFit
        weight: 101
",
            "sched.yaml: profiles[0].plugins.score.enabled[1].weight: must be in the range 1..=100, got 101",
        ),
        (
            "profiles:
- plugins:
    multiPoint:
      enabled:
      - name: ImageLocality
        weight: -1
",
            "sched.yaml: profiles[0].plugins.multiPoint.enabled[0].weight: must be in the range 1..=100, got -1",
        ),
        (
            "profiles:
- plugins:
    multiPoint:
      enabled:
      - name: Foo
",
            "sched.yaml: profiles[0].plugins.multiPoint.enabled[0].name: plugin \"Foo\" does not exist (neither compiled in nor added by a Cargo feature)",
        ),
        (
            "profiles:
- plugins:
    filter:
      enabled:
      - name: NodeName
      - name: MyCustomFilter
",
            "sched.yaml: profiles[0].plugins.filter.enabled[1].name: plugin \"MyCustomFilter\" does not exist (neither compiled in nor added by a Cargo feature)",
        ),
        (
            "profiles:
- plugins:
    filter:
      enabled:
      - name: EBSLimits
",
            "sched.yaml: profiles[0].plugins.filter.enabled[0].name: plugin \"EBSLimits\" was removed from kube-scheduler",
        ),
        (
            "profiles:
- plugins:
    filter:
      enabled:
      - name: '*'
",
            "sched.yaml: profiles[0].plugins.filter.enabled[0].name: \"*\" may only be used in a disabled list",
        ),
        (
            "profiles:
- plugins:
    filter:
      enabled:
      - name: ''
",
            "sched.yaml: profiles[0].plugins.filter.enabled[0].name: required value",
        ),
    ];
    for (body, want) in rows {
        check(body, want);
    }
}

#[test]
fn plugin_config() {
    let rows = [
        (
            "profiles:
- pluginConfig:
  - name: NodeResourcesFit
  - name: NodeResourcesFit
",
            "sched.yaml: profiles[0].pluginConfig[1].name: duplicate value \"NodeResourcesFit\"",
        ),
        (
            "profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        resources:
        - name: cpu
          weight: 0
",
            "sched.yaml: profiles[0].pluginConfig[0].args: plugin \"NodeResourcesFit\" of profile \"default-scheduler\": invalid NodeResourcesFitArgs: scoringStrategy.resources[0].weight: must be in the range 1..=100",
        ),
        (
            "profiles:
- pluginConfig:
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 1
  - name: NodeResourcesFit
    args:
      scoringStrategie: {}
",
            "sched.yaml: profiles[0].pluginConfig[1].args: plugin \"NodeResourcesFit\" of profile \"default-scheduler\": decoding NodeResourcesFitArgs: unknown field `scoringStrategie`",
        ),
        (
            // A bad value deep inside names its field.
            "profiles:
- schedulerName: tight
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        resources:
        - name: cpu
          weight: heavy
",
            "sched.yaml: profiles[0].pluginConfig[0].args: plugin \"NodeResourcesFit\" of profile \"tight\": decoding NodeResourcesFitArgs: scoringStrategy.resources[0].weight: invalid type: string \"heavy\", expected i64",
        ),
        (
            "profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        wrong: 1
",
            "sched.yaml: profiles[0].pluginConfig[0].args: plugin \"NodeResourcesFit\" of profile \"default-scheduler\": decoding NodeResourcesFitArgs: scoringStrategy: unknown field `wrong`",
        ),
        (
            "profiles:
- pluginConfig:
  - name: PrioritySort
    args:
      reverse: true
",
            "sched.yaml: profiles[0].pluginConfig[0].args: plugin \"PrioritySort\" of profile \"default-scheduler\": this plugin takes no args",
        ),
        (
            "profiles:
- pluginConfig:
  - name: Foo
    args: {}
",
            "sched.yaml: profiles[0].pluginConfig[0].name: plugin \"Foo\" does not exist (neither compiled in nor added by a Cargo feature)",
        ),
    ];
    for (body, want) in rows {
        check(body, want);
    }
}

#[test]
fn plugin_args_kind_and_version_are_accepted() {
    let loaded = load(&format!(
        "{HEADER}profiles:
- pluginConfig:
  - name: InterPodAffinity
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: InterPodAffinityArgs
      hardPodAffinityWeight: 3
"
    ));
    assert!(loaded.is_ok(), "{:?}", loaded.err().map(|e| e.to_string()));
}

#[test]
fn extender_urls_with_ports_paths_and_ipv6_hosts_are_accepted() {
    for url in [
        "http://127.0.0.1:8888/scheduler",
        "https://extender.kube-system.svc",
        "http://[::1]:8888/",
        "http://user@ext:80/x?y",
    ] {
        let loaded = load(&format!(
            "{HEADER}extenders:\n- urlPrefix: {url:?}\n  filterVerb: filter\n"
        ));
        assert!(
            loaded.is_ok(),
            "{url}: {:?}",
            loaded.err().map(|e| e.to_string())
        );
    }
}

#[test]
fn extenders() {
    let rows = [
        (
            "extenders:\n- filterVerb: filter\n",
            "sched.yaml: extenders[0].urlPrefix: required value when a verb is set",
        ),
        (
            "extenders:\n- urlPrefix: localhost:8888/scheduler\n  filterVerb: filter\n",
            "sched.yaml: extenders[0].urlPrefix: must be an http:// or https:// URL with a host, got \"localhost:8888/scheduler\"",
        ),
        (
            "extenders:\n- urlPrefix: http://:8888/\n  filterVerb: filter\n",
            "sched.yaml: extenders[0].urlPrefix: must be an http:// or https:// URL with a host, got \"http://:8888/\"",
        ),
        (
            "extenders:\n- urlPrefix: https://ext.example:99999\n  filterVerb: filter\n",
            "sched.yaml: extenders[0].urlPrefix: must be an http:// or https:// URL with a host",
        ),
        (
            "extenders:\n- urlPrefix: http://127.0.0.1/\n  prioritizeVerb: prioritize\n",
            "sched.yaml: extenders[0].weight: must have a positive weight applied to it, got 0",
        ),
        (
            "extenders:
- urlPrefix: http://127.0.0.1:1/
  bindVerb: bind
- urlPrefix: http://127.0.0.1:2/
  bindVerb: bind
",
            "sched.yaml: extenders: only one extender can implement bind, found 2",
        ),
        (
            "extenders:
- urlPrefix: http://127.0.0.1/
  managedResources:
  - name: cpu
",
            "sched.yaml: extenders[0].managedResources[0].name: \"cpu\" is an invalid extended resource name",
        ),
        (
            "extenders:
- urlPrefix: http://127.0.0.1/
  managedResources:
  - name: kubernetes.io/foo
",
            "sched.yaml: extenders[0].managedResources[0].name: \"kubernetes.io/foo\" is an invalid extended resource name",
        ),
        (
            "extenders:
- urlPrefix: http://127.0.0.1/
  managedResources:
  - name: a/b/c
",
            "sched.yaml: extenders[0].managedResources[0].name: a qualified name must consist of",
        ),
        (
            "extenders:
- urlPrefix: http://127.0.0.1/
  managedResources:
  - name: example.com/-gpu
",
            "sched.yaml: extenders[0].managedResources[0].name: name part must consist of alphanumeric characters",
        ),
        (
            "extenders:
- urlPrefix: http://127.0.0.1:1/
  managedResources:
  - name: example.com/gpu
- urlPrefix: http://127.0.0.1:2/
  managedResources:
  - name: example.com/gpu
",
            "sched.yaml: extenders[1].managedResources[0].name: duplicate extender managed resource name \"example.com/gpu\"",
        ),
    ];
    for (body, want) in rows {
        check(body, want);
    }
}

#[test]
fn decoding_errors_carry_their_path() {
    let rows = [
        (
            "parallelizm: 3\n",
            "sched.yaml: parallelizm: unknown field `parallelizm`, expected one of apiVersion, kind, parallelism",
        ),
        (
            "profiles:\n- schedulerName: a\n  plugin: {}\n",
            "unknown field `plugin`",
        ),
        (
            "profiles:
- plugins:
    score:
      enabled:
      - name: ImageLocality
      - name: NodeResourcesFit
        weight: high
",
            "sched.yaml: profiles[0].plugins.score.enabled[1].weight: ",
        ),
        (
            "leaderElection:\n  leaseDuration: 15\n",
            "sched.yaml: leaderElection.leaseDuration: ",
        ),
        (
            "leaderElection:\n  leaseDuration: 15 parsecs\n",
            "sched.yaml: leaderElection.leaseDuration: unknown unit",
        ),
        ("parallelism: many\n", "sched.yaml: parallelism: "),
        (
            "extenders:\n- urlPrefix: x\n  enableHttps: true\n",
            "unknown field `enableHttps`",
        ),
    ];
    for (body, want) in rows {
        check(body, want);
    }
}

#[test]
fn unknown_nested_field_names_its_parent() {
    let err = load_err(&format!(
        "{HEADER}profiles:\n- schedulerName: a\n  plugins:\n    score:\n      enabeld: []\n"
    ));
    assert!(err.contains("profiles[0].plugins.score"), "{err}");
    assert!(err.contains("unknown field `enabeld`"), "{err}");
}

#[test]
fn type_header() {
    let rows = [
        (
            "apiVersion: kubescheduler.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n",
            "sched.yaml: apiVersion: unsupported value \"kubescheduler.config.k8s.io/v1alpha1\"",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Pod\n",
            "sched.yaml: kind: unsupported value \"Pod\": must be \"KubeSchedulerConfiguration\"",
        ),
        (
            "kind: KubeSchedulerConfiguration\n",
            "sched.yaml: apiVersion: required value",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\n",
            "sched.yaml: kind: required value",
        ),
        ("", "sched.yaml: the file is empty"),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: [unclosed\n",
            "sched.yaml: kind: ",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n---\nkind: Pod\n",
            "sched.yaml: multiple YAML documents detected; a configuration file holds one document",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 1\nparallelism: 2\n",
            "sched.yaml: duplicate mapping key: parallelism at line 4",
        ),
    ];
    for (doc, want) in rows {
        let err = load_err(doc);
        assert!(err.contains(want), "expected {want:?} in {err:?}");
    }
}

#[test]
fn every_problem_is_reported_one_per_line() {
    let err = load_err(&format!(
        "{HEADER}parallelism: 0
podInitialBackoffSeconds: 0
profiles:
- plugins:
    score:
      enabled:
      - name: ImageLocality
        weight: 500
  pluginConfig:
  - name: Foo
extenders:
- prioritizeVerb: p
"
    ));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 6, "{err}");
    assert!(lines.iter().all(|l| l.starts_with("sched.yaml: ")), "{err}");
    for want in [
        "parallelism:",
        "podInitialBackoffSeconds:",
        "profiles[0].plugins.score.enabled[0].weight:",
        "profiles[0].pluginConfig[0].name:",
        "extenders[0].urlPrefix:",
        "extenders[0].weight:",
    ] {
        assert!(err.contains(want), "missing {want} in\n{err}");
    }
}

#[test]
fn problems_are_structured_too() {
    let err = load(&format!("{HEADER}parallelism: 0\n")).expect_err("refused");
    let problems = err.problems();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].path, "parallelism");
}

#[test]
fn a_webassembly_guest_in_a_build_without_plugin_wasm_names_the_feature() {
    let body = "profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: NodeNumber}]
  pluginConfig:
  - name: NodeNumber
    args: {guestURL: guests/nodenumber.wasm}
";
    check(
        body,
        "sched.yaml: profiles[0].plugins.multiPoint.enabled[0].name: plugin \"NodeNumber\" is a WebAssembly guest (its args name a guestURL), which this build cannot run; rebuild kubesched with the Cargo feature \"plugin-wasm\"",
    );
    check(
        body,
        "sched.yaml: profiles[0].pluginConfig[0].name: plugin \"NodeNumber\" is a WebAssembly guest",
    );
}
