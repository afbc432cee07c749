//! The Helm chart of `cargo xtask deploy` installs the same objects as its manifests: the
//! chart is rendered by a Go-template engine with Helm's functions (tests/helm) with its
//! default values and with values that match other options, and every object is compared
//! with the manifests' (same kinds and names, RBAC rules, args, ports, probes, ...). Values
//! the manifests have no option for land where they should.

mod helm;

use xtask::plugins;
use xtask::render::{self, DeployOptions, Rendered};
use xtask::yaml::{self, Yaml};

fn rendered(opts: &DeployOptions) -> Rendered {
    xtask::deploy::render(opts).expect("renders")
}

/// The chart's files of a rendering, relative to the chart's folder.
fn chart_files(r: &Rendered) -> Vec<(String, String)> {
    let prefix = format!("{}/", xtask::chart::DIR);
    r.files
        .iter()
        .filter_map(|f| {
            f.path
                .strip_prefix(&prefix)
                .map(|p| (p.to_string(), f.contents.clone()))
        })
        .collect()
}

fn manifests(r: &Rendered) -> Vec<Yaml> {
    yaml::parse_documents(r.file(render::MANIFESTS_FILE).expect("manifests")).expect("valid YAML")
}

fn kind(doc: &Yaml) -> &str {
    doc.get("kind").and_then(Yaml::as_str).unwrap_or_default()
}

fn key(doc: &Yaml) -> String {
    let meta = |k: &str| {
        doc.at(&["metadata", k])
            .and_then(Yaml::as_str)
            .unwrap_or("-")
            .to_string()
    };
    format!("{} {}/{}", kind(doc), meta("namespace"), meta("name"))
}

fn to_json(v: &Yaml) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Int(n) => Value::from(*n),
        Yaml::Float(f) => Value::from(*f),
        Yaml::Str(s) => Value::String(s.clone()),
        Yaml::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        Yaml::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
    }
}

const FINGERPRINT: &str = "kubesched/config-fingerprint";

/// An object as compared: the ConfigMap's configuration parsed (the chart's toYaml and the
/// manifests' emitter lay it out differently), and the Deployment's configuration
/// fingerprint checked against its own ConfigMap and then left out, since the manifests
/// hash with FNV-1a (xtask has no hash crate) and the chart with Helm's `sha256sum`.
fn normalised(doc: &Yaml, config_text: &str, hash: fn(&str) -> String) -> serde_json::Value {
    let mut json = to_json(doc);
    match kind(doc) {
        "ConfigMap" => {
            let data = &mut json["data"][render::CONFIG_KEY];
            let text = data.as_str().expect("config.yaml is a string").to_string();
            *data = to_json(&yaml::parse(&text).expect("the configuration is YAML"));
        }
        "Deployment" => {
            let annotations = json["spec"]["template"]["metadata"]["annotations"]
                .as_object_mut()
                .expect("pod annotations");
            let fingerprint = annotations
                .remove(FINGERPRINT)
                .expect("the pods carry the configuration's fingerprint");
            assert_eq!(
                fingerprint.as_str(),
                Some(hash(config_text).as_str()),
                "the fingerprint is the configuration's"
            );
            if annotations.is_empty() {
                json["spec"]["template"]["metadata"]
                    .as_object_mut()
                    .expect("pod metadata")
                    .remove("annotations");
            }
        }
        _ => {}
    }
    json
}

fn config_text(docs: &[Yaml]) -> String {
    docs.iter()
        .find(|d| kind(d) == "ConfigMap")
        .and_then(|d| d.at(&["data", render::CONFIG_KEY]))
        .and_then(Yaml::as_str)
        .expect("a ConfigMap with the configuration")
        .to_string()
}

/// Installs the chart rendered with `chart_opts` into `opts.namespace` with `overrides` and
/// checks it holds exactly the objects of `opts`' manifests (but the Namespace, which
/// `helm install --create-namespace` makes).
fn check(chart_opts: &DeployOptions, overrides: &str, opts: &DeployOptions) -> helm::Release {
    let overrides = yaml::parse(overrides).expect("overrides are YAML");
    let release = helm::template(
        &chart_files(&rendered(chart_opts)),
        "kubesched",
        &opts.namespace,
        &overrides,
    )
    .unwrap_or_else(|e| panic!("the chart renders: {e}"));
    let want: Vec<Yaml> = manifests(&rendered(opts))
        .into_iter()
        .filter(|d| kind(d) != "Namespace")
        .collect();
    let mut want_keys: Vec<String> = want.iter().map(key).collect();
    let mut got_keys: Vec<String> = release.objects.iter().map(key).collect();
    want_keys.sort();
    got_keys.sort();
    assert_eq!(
        got_keys, want_keys,
        "the chart's objects are the manifests'"
    );

    // The manifests' config text ends in the newline of its literal block; Helm's include
    // output, which the chart hashes, has none.
    let want_config = config_text(&want);
    let got_config = config_text(&release.objects);
    let got_hashed = got_config.strip_suffix('\n').unwrap_or(&got_config);
    for w in &want {
        let g = release
            .objects
            .iter()
            .find(|g| key(g) == key(w))
            .expect("the same keys");
        assert_eq!(
            normalised(g, got_hashed, helm::sha256_hex),
            normalised(w, &want_config, render::fingerprint),
            "{} differs between the chart and the manifests\n--- chart\n{}--- manifests\n{}",
            key(w),
            g.to_document(),
            w.to_document()
        );
    }
    release
}

fn custom_options() -> DeployOptions {
    const CUSTOM: &str =
        "PrioritySort,NodeName,TaintToleration,NodeResourcesFit,DefaultBinder,HintNode";
    let known = xtask::known_plugins().expect("crates/cli/Cargo.toml is readable");
    DeployOptions {
        scheduler_name: "hint-scheduler".to_string(),
        namespace: "scheduling".to_string(),
        image: "registry.example.com/kubesched:slim".to_string(),
        replicas: 2,
        plugins: Some(plugins::resolve(CUSTOM, &known).expect("known plugins")),
        plugins_arg: Some(CUSTOM.to_string()),
        service_monitor: true,
        ..DeployOptions::default()
    }
}

#[test]
fn default_values_install_the_default_manifests() {
    let release = check(&DeployOptions::default(), "{}", &DeployOptions::default());
    assert!(
        release.notes.contains("schedulerName: kubesched\n"),
        "{}",
        release.notes
    );
    assert!(release.notes.contains("kube-system/kubesched-metrics"));
}

#[test]
fn two_replicas_and_a_service_monitor_as_the_options_give_them() {
    let opts = DeployOptions {
        replicas: 2,
        service_monitor: true,
        ..DeployOptions::default()
    };
    let release = check(
        &DeployOptions::default(),
        "{replicaCount: 2, serviceMonitor: {enabled: true}}",
        &opts,
    );
    let kinds: Vec<&str> = release.objects.iter().map(kind).collect();
    for k in ["PodDisruptionBudget", "ServiceMonitor", "Service"] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
}

#[test]
fn names_namespace_image_and_leader_election_from_values() {
    let opts = DeployOptions {
        scheduler_name: "my.scheduler-2".to_string(),
        namespace: "scheduling".to_string(),
        image: "registry.example.com:5000/team/kubesched:slim".to_string(),
        leader_election: false,
        ..DeployOptions::default()
    };
    check(
        &DeployOptions::default(),
        "schedulerName: my.scheduler-2\n\
         image: {repository: 'registry.example.com:5000/team/kubesched', tag: slim}\n\
         leaderElect: false\n",
        &opts,
    );
    let digest = DeployOptions {
        image: "registry.example.com/kubesched@sha256:0123abcd".to_string(),
        ..DeployOptions::default()
    };
    check(&digest, "{}", &digest);
}

#[test]
fn a_chart_rendered_with_options_defaults_to_them() {
    // Two replicas, a ServiceMonitor, another namespace and name, a slim plugin set.
    let opts = custom_options();
    check(&opts, "{}", &opts);
    let no_election = DeployOptions {
        leader_election: false,
        ..DeployOptions::default()
    };
    check(&no_election, "{}", &no_election);
}

#[test]
fn plugins_with_their_own_kinds_bring_their_crds() {
    let known = xtask::known_plugins().expect("crates/cli/Cargo.toml is readable");
    let opts = DeployOptions {
        plugins: Some(plugins::resolve("default,Coscheduling", &known).expect("known plugins")),
        plugins_arg: Some("default,Coscheduling".to_string()),
        ..DeployOptions::default()
    };
    let release = check(&opts, "{}", &opts);
    assert!(
        release
            .objects
            .iter()
            .any(|d| kind(d) == "CustomResourceDefinition"),
        "the PodGroup CRD is installed"
    );
}

#[test]
fn several_replicas_without_leader_election_are_refused() {
    let err = helm::template(
        &chart_files(&rendered(&DeployOptions::default())),
        "kubesched",
        "kube-system",
        &yaml::parse("{replicaCount: 3, leaderElect: false}").expect("yaml"),
    )
    .expect_err("refused");
    assert!(err.contains("needs leaderElect"), "{err}");
}

fn deployment(release: &helm::Release) -> &Yaml {
    release
        .objects
        .iter()
        .find(|d| kind(d) == "Deployment")
        .expect("a Deployment")
}

#[test]
fn scheduling_constraints_plugins_and_extra_args_land_in_place() {
    let overrides = "\
priorityClassName: ''
nodeSelector: {node-role.kubernetes.io/control-plane: ''}
tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}]}]}}}
replicaCount: 2
resources: {limits: {memory: 512Mi}}
imagePullSecrets: [{name: regcred}]
extraArgs: [--v=2, --kube-api-qps=100]
plugins: {multiPoint: {enabled: [{name: NodeResourcesFit, weight: 2}]}, score: {disabled: [{name: ImageLocality}]}}
pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: MostAllocated}}}]
leaderElection: {resourceName: my-lease, resourceNamespace: leases}
serviceMonitor: {enabled: true, interval: 10s, labels: {release: prometheus}}
";
    let release = helm::template(
        &chart_files(&rendered(&DeployOptions::default())),
        "kubesched",
        "kube-system",
        &yaml::parse(overrides).expect("yaml"),
    )
    .unwrap_or_else(|e| panic!("renders: {e}"));
    let dep = deployment(&release);
    let pod = dep.at(&["spec", "template", "spec"]).expect("pod spec");
    let values = yaml::parse(overrides).expect("yaml");
    assert_eq!(pod.get("priorityClassName"), None, "'' leaves it out");
    for field in [
        "nodeSelector",
        "tolerations",
        "affinity",
        "imagePullSecrets",
    ] {
        assert_eq!(
            pod.get(field).map(to_json),
            values.get(field).map(to_json),
            "{field}"
        );
    }
    let container = &pod
        .get("containers")
        .and_then(Yaml::as_seq)
        .expect("containers")[0];
    assert_eq!(
        container.get("args"),
        Some(&Yaml::seq([
            "run",
            "--config",
            "/etc/kubesched/config.yaml",
            "--v=2",
            "--kube-api-qps=100"
        ]))
    );
    // Values merge into the defaults as Helm's do: the limit joins the default requests.
    assert_eq!(
        container.get("resources").map(to_json),
        Some(to_json(
            &yaml::parse("{requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 512Mi}}")
                .expect("yaml")
        ))
    );

    let config = yaml::parse(&config_text(&release.objects)).expect("configuration");
    let profile = &config
        .get("profiles")
        .and_then(Yaml::as_seq)
        .expect("profiles")[0];
    assert_eq!(
        profile.get("plugins").map(to_json),
        values.get("plugins").map(to_json)
    );
    assert_eq!(
        profile.get("pluginConfig").map(to_json),
        values.get("pluginConfig").map(to_json)
    );
    assert_eq!(
        config
            .at(&["leaderElection", "resourceName"])
            .and_then(Yaml::as_str),
        Some("my-lease")
    );

    // The lease Role follows the lease: its namespace, and its name in resourceNames.
    let role = release
        .objects
        .iter()
        .find(|d| kind(d) == "Role" && key(d).contains("leader-election"))
        .expect("the leader-election Role");
    assert_eq!(
        role.at(&["metadata", "namespace"]).and_then(Yaml::as_str),
        Some("leases")
    );
    let named: Vec<&Yaml> = role
        .get("rules")
        .and_then(Yaml::as_seq)
        .expect("rules")
        .iter()
        .filter_map(|r| r.get("resourceNames"))
        .collect();
    assert_eq!(named, vec![&Yaml::seq(["my-lease"])]);

    let monitor = release
        .objects
        .iter()
        .find(|d| kind(d) == "ServiceMonitor")
        .expect("a ServiceMonitor");
    assert_eq!(
        monitor
            .at(&["metadata", "labels", "release"])
            .and_then(Yaml::as_str),
        Some("prometheus")
    );
    let endpoint = &monitor
        .at(&["spec", "endpoints"])
        .and_then(Yaml::as_seq)
        .expect("endpoints")[0];
    assert_eq!(endpoint.get("interval").and_then(Yaml::as_str), Some("10s"));

    // Still objects of the API: the Deployment round-trips through its type.
    let json = to_json(dep);
    let typed: k8s_openapi::api::apps::v1::Deployment =
        serde_json::from_value(json.clone()).expect("a Deployment");
    assert_eq!(serde_json::to_value(&typed).expect("encodes"), json);
}

#[test]
fn values_yaml_documents_every_value_the_templates_read() {
    // Every `.Values.x.y` a template reads is in values.yaml (a value missing there would
    // render `<no value>`, which the renderer refuses, only when a test sets no override).
    let files = chart_files(&rendered(&DeployOptions::default()));
    let values = yaml::parse(
        &files
            .iter()
            .find(|(p, _)| p == "values.yaml")
            .expect("values.yaml")
            .1,
    )
    .expect("values.yaml parses");
    let mut read = std::collections::BTreeSet::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with("templates/")) {
        let mut rest = text.as_str();
        while let Some(i) = rest.find(".Values.") {
            rest = &rest[i + ".Values.".len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .unwrap_or(rest.len());
            read.insert((path.clone(), rest[..end].trim_end_matches('.').to_string()));
        }
    }
    assert!(read.len() > 15, "{read:?}");
    for (path, dotted) in read {
        let keys: Vec<&str> = dotted.split('.').collect();
        assert!(
            values.at(&keys).is_some(),
            "{path} reads .Values.{dotted}, which values.yaml lacks"
        );
    }
}
