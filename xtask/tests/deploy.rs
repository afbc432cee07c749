//! `cargo xtask deploy`: snapshots of the rendered files, the ClusterRole against the kube
//! backend's RBAC table and sources, the ConfigMap's configuration through the real config
//! crate (with the real plugins linked), and the checked-in deploy/ against a fresh render.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kubesched_framework::ExtensionPoint;
use xtask::plugins::{self, KnownPlugins};
use xtask::rbac::{RULES, Rule};

use xtask::render::{self, DeployOptions, ExtraConfig, Rendered, Scope};
use xtask::yaml::{self, Yaml};

// The real plugins, so the configuration is checked against the names, extension points and
// args the binary knows: its default set through its library, and the opt-in crates the
// renderings here name. rustc links a crate only when a source line names it.
use kubesched as _;
use kubesched_plugin_coscheduling as _;
use kubesched_plugin_hint_node as _;

const CUSTOM_PLUGINS: &str =
    "PrioritySort,NodeName,TaintToleration,NodeResourcesFit,DefaultBinder,HintNode";

fn known() -> KnownPlugins {
    xtask::known_plugins().expect("crates/cli/Cargo.toml is readable")
}

fn custom_options() -> DeployOptions {
    DeployOptions {
        scheduler_name: "hint-scheduler".to_string(),
        namespace: "scheduling".to_string(),
        image: "registry.example.com/kubesched:slim".to_string(),
        replicas: 2,
        plugins: Some(plugins::resolve(CUSTOM_PLUGINS, &known()).expect("known plugins")),
        plugins_arg: Some(CUSTOM_PLUGINS.to_string()),
        ..DeployOptions::default()
    }
}

fn rendered(opts: &DeployOptions) -> Rendered {
    xtask::deploy::render(opts).expect("renders")
}

fn manifests(r: &Rendered) -> Vec<Yaml> {
    let text = r.file(render::MANIFESTS_FILE).expect("manifests rendered");
    yaml::parse_documents(text).expect("manifests are valid YAML")
}

fn kind(doc: &Yaml) -> &str {
    doc.get("kind").and_then(Yaml::as_str).unwrap_or_default()
}

fn find<'a>(docs: &'a [Yaml], k: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| kind(d) == k)
        .unwrap_or_else(|| panic!("no {k} rendered"))
}

/// The configuration held by the rendered ConfigMap.
fn config_text(r: &Rendered) -> String {
    let docs = manifests(r);
    find(&docs, "ConfigMap")
        .at(&["data", render::CONFIG_KEY])
        .and_then(Yaml::as_str)
        .expect("the ConfigMap holds config.yaml")
        .to_string()
}

/// Snapshots of the files of `r`, but those the same as in `same_as` (the chart's templates
/// that no option changes are snapshotted once) and the dashboard, which no option changes
/// (checked_in_deploy_folder_is_up_to_date and tests/tests/kube_dashboard.rs hold it).
fn snapshot_all(prefix: &str, r: &Rendered, same_as: Option<&Rendered>) {
    let unchanged = |path: &str, contents: &str| {
        same_as.is_some_and(|other| other.file(path) == Some(contents))
    };
    for file in r
        .files
        .iter()
        .filter(|f| f.path != xtask::dashboard::FILE && !unchanged(f.path, &f.contents))
    {
        let name = format!("{prefix}__{}", file.path.replace(['/', '.'], "_"));
        insta::assert_snapshot!(name, file.contents);
    }
}

#[test]
fn default_rendering() {
    let r = rendered(&DeployOptions::default());
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    snapshot_all("default", &r, None);
}

#[test]
fn custom_plugin_set_rendering() {
    let r = rendered(&custom_options());
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    snapshot_all("custom", &r, Some(&rendered(&DeployOptions::default())));
}

#[test]
fn every_file_is_valid_yaml_with_the_expected_objects() {
    for opts in [DeployOptions::default(), custom_options()] {
        let r = rendered(&opts);
        let kinds: Vec<String> = manifests(&r).iter().map(|d| kind(d).to_string()).collect();
        let mut expect = vec![];
        if opts.namespace == "scheduling" {
            expect.push("Namespace");
        }
        expect.extend([
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            // extension-apiserver-authentication-reader, the built-in Role.
            "RoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Deployment",
            "Service",
        ]);
        if opts.replicas > 1 {
            expect.push("PodDisruptionBudget");
        }
        assert_eq!(kinds, expect);
        for example in ["examples/hint-node.yaml", "examples/scheduler-name.yaml"] {
            let doc = yaml::parse(r.file(example).expect("rendered")).expect("valid YAML");
            assert_eq!(
                doc.at(&["spec", "template", "spec", "schedulerName"])
                    .and_then(Yaml::as_str),
                Some(opts.scheduler_name.as_str()),
                "{example}"
            );
        }
    }
}

#[test]
fn deployment_runs_the_config_with_probes_and_priority() {
    let opts = custom_options();
    let docs = manifests(&rendered(&opts));
    let dep = find(&docs, "Deployment");
    assert_eq!(dep.at(&["spec", "replicas"]), Some(&Yaml::Int(2)));
    let pod = dep.at(&["spec", "template", "spec"]).expect("pod spec");
    assert_eq!(
        pod.get("priorityClassName").and_then(Yaml::as_str),
        Some("system-cluster-critical")
    );
    assert_eq!(
        pod.get("serviceAccountName").and_then(Yaml::as_str),
        Some("hint-scheduler")
    );
    let c = &pod
        .get("containers")
        .and_then(Yaml::as_seq)
        .expect("containers")[0];
    assert_eq!(
        c.get("image").and_then(Yaml::as_str),
        Some("registry.example.com/kubesched:slim")
    );
    assert_eq!(
        c.get("args"),
        Some(&Yaml::seq([
            "run",
            "--config",
            "/etc/kubesched/config.yaml"
        ]))
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = c.at(&[probe, "httpGet"]).expect("probe");
        assert_eq!(get.get("path").and_then(Yaml::as_str), Some(path));
        assert_eq!(get.get("port"), Some(&Yaml::Int(10259)));
        assert_eq!(get.get("scheme").and_then(Yaml::as_str), Some("HTTPS"));
    }
    assert!(c.at(&["resources", "requests", "cpu"]).is_some());
    assert!(c.at(&["resources", "requests", "memory"]).is_some());
    let mount = &c
        .get("volumeMounts")
        .and_then(Yaml::as_seq)
        .expect("mounts")[0];
    assert_eq!(
        mount.get("mountPath").and_then(Yaml::as_str),
        Some("/etc/kubesched")
    );
    let volume = &pod.get("volumes").and_then(Yaml::as_seq).expect("volumes")[0];
    let cm = find(&docs, "ConfigMap");
    assert_eq!(
        volume.at(&["configMap", "name"]),
        cm.at(&["metadata", "name"]),
        "the Deployment mounts the rendered ConfigMap"
    );
}

#[test]
fn dockerfile_bakes_the_chosen_features() {
    let d = rendered(&DeployOptions::default());
    let dockerfile = d.file("Dockerfile").expect("rendered");
    assert!(dockerfile.contains("ARG FEATURES=\"inventory,all-plugins\""));
    assert!(dockerfile.contains("FROM rust:1.95-bookworm AS builder"));
    assert!(dockerfile.contains("FROM gcr.io/distroless/cc-debian12:nonroot"));
    assert!(dockerfile.contains(
        "cargo build --release --locked $offline -p kubesched --no-default-features --features \"$FEATURES\""
    ));
    // Offline with a vendored tree, and kube-scheduler's command line as the entry point.
    assert!(dockerfile.contains(
        "if [ -d vendor ] && [ -f .cargo/vendor.toml ]; then offline=\"--offline --config .cargo/vendor.toml\"; fi"
    ));
    assert!(dockerfile.contains("KUBESCHED_GIT_COMMIT=\"$GIT_COMMIT\""));
    assert!(dockerfile.contains("USER 65532:65532"));
    assert!(dockerfile.ends_with("ENTRYPOINT [\"/usr/local/bin/kubesched\"]\n"));
    let c = rendered(&custom_options());
    assert!(c.file("Dockerfile").expect("rendered").contains(
        "ARG FEATURES=\"inventory,plugin-default-binder,plugin-hint-node,plugin-node-name,plugin-node-resources-fit,plugin-priority-sort,plugin-taint-toleration\""
    ));
}

/// The JSON form of a rendered value.
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

/// Decodes `doc` as the API type `T` and encodes it again: a field the type does not have
/// (a typo) or a value of the wrong shape shows up as a difference.
fn round_trips_as<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Yaml) {
    let json = to_json(doc);
    let typed: T = serde_json::from_value(json.clone())
        .unwrap_or_else(|e| panic!("{} does not decode: {e}", kind(doc)));
    let back = serde_json::to_value(&typed).expect("encodes");
    assert_eq!(
        back,
        json,
        "{} changed in a round trip through its API type",
        kind(doc)
    );
}

#[test]
fn objects_match_the_kubernetes_api_types() {
    use k8s_openapi::api::{apps, core, policy, rbac};
    let check = |doc: &Yaml| match kind(doc) {
        "Namespace" => round_trips_as::<core::v1::Namespace>(doc),
        "ServiceAccount" => round_trips_as::<core::v1::ServiceAccount>(doc),
        "ClusterRole" => round_trips_as::<rbac::v1::ClusterRole>(doc),
        "ClusterRoleBinding" => round_trips_as::<rbac::v1::ClusterRoleBinding>(doc),
        "Role" => round_trips_as::<rbac::v1::Role>(doc),
        "RoleBinding" => round_trips_as::<rbac::v1::RoleBinding>(doc),
        "ConfigMap" => round_trips_as::<core::v1::ConfigMap>(doc),
        "Deployment" => round_trips_as::<apps::v1::Deployment>(doc),
        "Service" => round_trips_as::<core::v1::Service>(doc),
        "PodDisruptionBudget" => round_trips_as::<policy::v1::PodDisruptionBudget>(doc),
        // prometheus-operator's kind has no type here: service_monitor_scrapes_the_metrics_service
        // checks its fields.
        "ServiceMonitor" => {}
        other => panic!("unexpected kind {other}"),
    };
    let monitored = DeployOptions {
        service_monitor: true,
        ..custom_options()
    };
    for opts in [DeployOptions::default(), custom_options(), monitored] {
        let r = rendered(&opts);
        manifests(&r).iter().for_each(check);
        for example in ["examples/hint-node.yaml", "examples/scheduler-name.yaml"] {
            check(&yaml::parse(r.file(example).expect("rendered")).expect("valid YAML"));
        }
    }
}

// ---- RBAC ------------------------------------------------------------------------------

/// One resource granted by a rendered ClusterRole or Role.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    /// `ClusterRole` or `Role`.
    role_kind: String,
    /// The Role's namespace.
    namespace: Option<String>,
    group: String,
    resource: String,
    verbs: Vec<String>,
    /// The rule's `resourceNames` (empty: every object).
    names: Vec<String>,
}

/// Every resource granted by the rendered roles, one entry per group and resource.
fn granted(docs: &[Yaml]) -> Vec<Grant> {
    let mut out = Vec::new();
    for d in docs
        .iter()
        .filter(|d| matches!(kind(d), "ClusterRole" | "Role"))
    {
        let namespace = d
            .at(&["metadata", "namespace"])
            .and_then(Yaml::as_str)
            .map(String::from);
        for rule in d.get("rules").and_then(Yaml::as_seq).unwrap_or_default() {
            let strings = |key: &str| -> Vec<String> {
                rule.get(key)
                    .and_then(Yaml::as_seq)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            };
            for group in strings("apiGroups") {
                for resource in strings("resources") {
                    out.push(Grant {
                        role_kind: kind(d).to_string(),
                        namespace: namespace.clone(),
                        group: group.clone(),
                        resource,
                        verbs: strings("verbs"),
                        names: strings("resourceNames"),
                    });
                }
            }
        }
    }
    out
}

/// Whether the rules of one role, together, grant every verb (RBAC adds rules up).
fn is_granted(docs: &[Yaml], group: &str, resource: &str, verbs: &[&str]) -> bool {
    let grants = granted(docs);
    grants.iter().any(|role| {
        verbs.iter().all(|verb| {
            grants.iter().any(|g| {
                (&g.role_kind, &g.namespace) == (&role.role_kind, &role.namespace)
                    && g.group == group
                    && g.resource == resource
                    && g.verbs.iter().any(|x| x == verb)
            })
        })
    })
}

#[test]
fn every_rule_of_the_rbac_table_is_granted_in_its_scope() {
    for opts in [DeployOptions::default(), custom_options()] {
        let docs = manifests(&rendered(&opts));
        let grants = granted(&docs);
        let rules = render::rbac_rules(&opts);
        for rule in &rules {
            let want_role = match render::scope_of(rule) {
                Scope::Cluster => ("ClusterRole", None),
                Scope::LeaseNamespace => ("Role", Some(opts.namespace.clone())),
                Scope::AuthConfigMapNamespace => ("Role", Some("kube-system".to_string())),
            };
            let hits: Vec<&Grant> = grants
                .iter()
                .filter(|g| {
                    (g.role_kind.as_str(), g.namespace.clone()) == want_role
                        && g.group == rule.api_group
                        && g.resource == rule.resource
                })
                .collect();
            assert!(
                !hits.is_empty(),
                "{rule:?} is not granted by a {want_role:?}"
            );
            // The verbs of the rules granting it, together, are the table's, in its order.
            let mut verbs: Vec<String> = hits.iter().flat_map(|g| g.verbs.clone()).collect();
            verbs.sort_by_key(|v| rule.verbs.iter().position(|t| t == v));
            let want: Vec<String> = rule.verbs.iter().map(|v| v.to_string()).collect();
            assert_eq!(verbs, want, "verbs of {}/{}", rule.api_group, rule.resource);
            for hit in hits {
                if render::scope_of(rule) == Scope::LeaseNamespace {
                    // The lease only, where RBAC can tell objects by name (not for create).
                    let named = hit
                        .verbs
                        .iter()
                        .all(|v| !render::UNNAMEABLE_VERBS.contains(&v.as_str()));
                    let want_names = if named {
                        vec![opts.scheduler_name.clone()]
                    } else {
                        Vec::new()
                    };
                    assert_eq!(hit.names, want_names, "resourceNames of {hit:?}");
                } else {
                    assert!(hit.names.is_empty(), "{hit:?}");
                }
            }
        }
        // Nothing beyond the table and the declarations.
        let granted_resources: BTreeSet<(String, Option<String>, String, String)> = grants
            .iter()
            .map(|g| {
                (
                    g.role_kind.clone(),
                    g.namespace.clone(),
                    g.group.clone(),
                    g.resource.clone(),
                )
            })
            .collect();
        assert_eq!(granted_resources.len(), rules.len());
        // Bindings point at the rendered roles and at the ServiceAccount.
        for (binding, role) in [
            ("ClusterRoleBinding", "ClusterRole"),
            ("RoleBinding", "Role"),
        ] {
            // (Bindings of built-in roles are checked in the_service_account_is_an_auth_delegator.)
            let r = find(&docs, role);
            let b = docs
                .iter()
                .find(|d| {
                    kind(d) == binding && d.at(&["roleRef", "name"]) == r.at(&["metadata", "name"])
                })
                .unwrap_or_else(|| panic!("no {binding} of the rendered {role}"));
            assert_eq!(
                b.at(&["roleRef", "kind"]).and_then(Yaml::as_str),
                Some(role)
            );
            let subject = &b.get("subjects").and_then(Yaml::as_seq).expect("subjects")[0];
            assert_eq!(
                subject.get("name").and_then(Yaml::as_str),
                Some(opts.scheduler_name.as_str())
            );
            assert_eq!(
                subject.get("namespace").and_then(Yaml::as_str),
                Some(opts.namespace.as_str())
            );
        }
    }
}

#[test]
fn the_service_account_is_an_auth_delegator() {
    for opts in [DeployOptions::default(), custom_options()] {
        let docs = manifests(&rendered(&opts));
        let bound: Vec<&str> = docs
            .iter()
            .filter(|d| kind(d) == "ClusterRoleBinding")
            .filter_map(|d| d.at(&["roleRef", "name"]).and_then(Yaml::as_str))
            .collect();
        for role in xtask::rbac::BOUND_CLUSTER_ROLES {
            assert!(bound.contains(role), "{role} not bound: {bound:?}");
        }
        // And the built-in Role that reads extension-apiserver-authentication, in its
        // namespace, as kube-scheduler's.
        for b in xtask::rbac::BOUND_ROLES {
            assert!(
                docs.iter().any(|d| kind(d) == "RoleBinding"
                    && d.at(&["metadata", "namespace"]).and_then(Yaml::as_str)
                        == Some(b.namespace)
                    && d.at(&["roleRef", "kind"]).and_then(Yaml::as_str) == Some("Role")
                    && d.at(&["roleRef", "name"]).and_then(Yaml::as_str) == Some(b.role)),
                "{} in {} not bound",
                b.role,
                b.namespace
            );
        }
    }
}

#[test]
fn leases_are_granted_where_the_lease_lives() {
    let extra = yaml::parse(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  resourceNamespace: leases-here\n",
    )
    .expect("valid YAML");
    let opts = DeployOptions {
        extra_config: Some(ExtraConfig {
            source: "lease.yaml".to_string(),
            value: extra,
        }),
        ..DeployOptions::default()
    };
    let docs = manifests(&rendered(&opts));
    let lease_role = granted(&docs)
        .into_iter()
        .find(|g| g.group == "coordination.k8s.io" && g.resource == "leases")
        .expect("leases granted");
    assert_eq!(lease_role.role_kind, "Role");
    assert_eq!(lease_role.namespace.as_deref(), Some("leases-here"));
}

#[test]
fn the_lease_role_names_the_configured_lease() {
    let extra = yaml::parse(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  resourceName: kube-scheduler\n",
    )
    .expect("valid YAML");
    let opts = DeployOptions {
        extra_config: Some(ExtraConfig {
            source: "lease.yaml".to_string(),
            value: extra,
        }),
        ..DeployOptions::default()
    };
    let docs = manifests(&rendered(&opts));
    let leases: Vec<Grant> = granted(&docs)
        .into_iter()
        .filter(|g| g.group == "coordination.k8s.io" && g.resource == "leases")
        .collect();
    let by_name: Vec<(Vec<String>, Vec<String>)> = leases
        .iter()
        .map(|g| (g.verbs.clone(), g.names.clone()))
        .collect();
    assert_eq!(
        by_name,
        [
            (vec!["create".to_string()], vec![]),
            (
                vec!["get".to_string(), "update".to_string()],
                vec!["kube-scheduler".to_string()]
            ),
        ]
    );
}

fn find_named<'a>(docs: &'a [Yaml], k: &str) -> Option<&'a Yaml> {
    docs.iter().find(|d| kind(d) == k)
}

#[test]
fn replicas_get_a_disruption_budget_and_spread_over_nodes() {
    for opts in [DeployOptions::default(), custom_options()] {
        let docs = manifests(&rendered(&opts));
        let dep = find(&docs, "Deployment");
        let selector = dep
            .at(&["spec", "selector", "matchLabels"])
            .expect("selector");
        let affinity = dep.at(&["spec", "template", "spec", "affinity"]);
        let pdb = find_named(&docs, "PodDisruptionBudget");
        if opts.replicas == 1 {
            assert!(affinity.is_none() && pdb.is_none(), "one replica: neither");
            continue;
        }
        let pdb = pdb.expect("a PodDisruptionBudget");
        assert_eq!(pdb.at(&["spec", "selector", "matchLabels"]), Some(selector));
        assert_eq!(pdb.at(&["spec", "minAvailable"]), Some(&Yaml::Int(1)));
        let term = &affinity
            .and_then(|a| {
                a.at(&[
                    "podAntiAffinity",
                    "preferredDuringSchedulingIgnoredDuringExecution",
                ])
            })
            .and_then(Yaml::as_seq)
            .expect("preferred anti-affinity")[0];
        assert_eq!(
            term.at(&["podAffinityTerm", "topologyKey"])
                .and_then(Yaml::as_str),
            Some("kubernetes.io/hostname")
        );
        assert_eq!(
            term.at(&["podAffinityTerm", "labelSelector", "matchLabels"]),
            Some(selector)
        );
    }
}

#[test]
fn service_monitor_scrapes_the_metrics_service() {
    let opts = DeployOptions {
        service_monitor: true,
        ..DeployOptions::default()
    };
    let docs = manifests(&rendered(&opts));
    assert!(
        find_named(
            &manifests(&rendered(&DeployOptions::default())),
            "ServiceMonitor"
        )
        .is_none()
    );
    let dep = find(&docs, "Deployment");
    let service = find(&docs, "Service");
    // The Service selects the scheduler's pods and targets the container's secure port.
    assert_eq!(
        service.at(&["spec", "selector"]),
        dep.at(&["spec", "template", "metadata", "labels"])
    );
    let port = &service
        .at(&["spec", "ports"])
        .and_then(Yaml::as_seq)
        .expect("ports")[0];
    assert_eq!(port.get("port"), Some(&Yaml::Int(10259)));
    let container = &dep
        .at(&["spec", "template", "spec", "containers"])
        .and_then(Yaml::as_seq)
        .expect("containers")[0];
    let container_port = &container
        .get("ports")
        .and_then(Yaml::as_seq)
        .expect("ports")[0];
    assert_eq!(port.get("targetPort"), container_port.get("name"));
    // The ServiceMonitor selects that Service in its namespace, by its port's name, over HTTPS.
    let monitor = find(&docs, "ServiceMonitor");
    assert_eq!(
        monitor.at(&["apiVersion"]).and_then(Yaml::as_str),
        Some("monitoring.coreos.com/v1")
    );
    assert_eq!(
        monitor.at(&["spec", "selector", "matchLabels"]),
        service.at(&["metadata", "labels"])
    );
    assert_eq!(
        monitor.at(&["spec", "namespaceSelector", "matchNames"]),
        Some(&Yaml::seq(["kube-system"]))
    );
    let endpoint = &monitor
        .at(&["spec", "endpoints"])
        .and_then(Yaml::as_seq)
        .expect("endpoints")[0];
    assert_eq!(endpoint.get("port"), port.get("name"));
    assert_eq!(endpoint.get("scheme").and_then(Yaml::as_str), Some("https"));
    assert_eq!(
        endpoint.get("path").and_then(Yaml::as_str),
        Some("/metrics")
    );
}

#[test]
fn metrics_service_names_are_dns_labels() {
    assert_eq!(
        render::metrics_service_name("kubesched"),
        "kubesched-metrics"
    );
    assert_eq!(
        render::metrics_service_name("my.scheduler-2"),
        "my-scheduler-2-metrics"
    );
    let long = "a".repeat(55) + ".b";
    let name = render::metrics_service_name(&long);
    assert_eq!(name.len(), 63);
    assert!(!name.contains('.') && !name.ends_with('-'), "{name}");
}

/// Every `.rs` file of crates/live/src (the RBAC table itself is crates/rbac).
fn cluster_sources() -> Vec<(PathBuf, String)> {
    let dir = xtask::workspace_root().join("crates/live/src");
    let mut out = Vec::new();
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("readable source");
                out.push((p, text));
            }
        }
    }
    out.sort();
    out
}

/// The string literal right after `key: "` at or after `from`, with its end.
fn literal_after(text: &str, key: &str, from: usize) -> Option<(String, usize)> {
    let needle = format!("{key}: \"");
    let start = text[from..].find(&needle)? + from + needle.len();
    let len = text[start..].find('"')?;
    Some((text[start..start + len].to_string(), start + len))
}

#[test]
fn the_rbac_table_covers_what_the_kube_backend_uses() {
    let sources = cluster_sources();
    if sources.is_empty() {
        // The backend is not in this checkout; the table alone is checked above.
        return;
    }
    let docs = manifests(&rendered(&DeployOptions::default()));
    let mut missing = BTreeSet::new();
    // Kinds the backend watches are declared as `api_group: "..", resource: ".."` pairs.
    for (path, text) in &sources {
        let mut at = 0;
        while let Some((group, end)) = literal_after(text, "api_group", at) {
            at = end;
            let Some((resource, end)) = literal_after(text, "resource", at) else {
                break;
            };
            at = end;
            if !is_granted(&docs, &group, &resource, &["list", "watch"]) {
                missing.insert(format!("{}: watch {group}/{resource}", path.display()));
            }
        }
    }
    // Writes, recognised by the kube-rs calls and k8s-openapi types the backend names.
    let writes: &[(&str, &str, &str, &[&str])] = &[
        ("create_subresource", "", "pods/binding", &["create"]),
        ("patch_status", "", "pods/status", &["patch"]),
        ("DeleteParams", "", "pods", &["delete"]),
        (
            "api::events::v1::",
            "events.k8s.io",
            "events",
            &["create", "patch"],
        ),
        (
            "api::coordination::v1::",
            "coordination.k8s.io",
            "leases",
            &["get", "create", "update"],
        ),
        (
            "Api::<PersistentVolume>::all",
            "",
            "persistentvolumes",
            &["update"],
        ),
        (
            "Api::<PersistentVolumeClaim>::namespaced",
            "",
            "persistentvolumeclaims",
            &["update"],
        ),
        (
            "api::authentication::v1::",
            "authentication.k8s.io",
            "tokenreviews",
            &["create"],
        ),
        (
            "api::authorization::v1::",
            "authorization.k8s.io",
            "subjectaccessreviews",
            &["create"],
        ),
    ];
    for (needle, group, resource, verbs) in writes {
        let used = sources.iter().any(|(_, t)| t.contains(needle));
        if used && !is_granted(&docs, group, resource, verbs) {
            missing.insert(format!("{needle}: {group}/{resource} {verbs:?}"));
        }
    }
    assert!(missing.is_empty(), "the rendered RBAC lacks: {missing:#?}");
}

// ---- configuration -------------------------------------------------------------------

fn load(r: &Rendered) -> kubesched_config::LoadedConfig {
    let text = config_text(r);
    kubesched_config::load_str(&text, "ConfigMap config.yaml")
        .unwrap_or_else(|e| panic!("the rendered configuration is refused: {e}\n{text}"))
}

#[test]
fn default_configuration_validates() {
    let loaded = load(&rendered(&DeployOptions::default()));
    let le = &loaded.config.leader_election;
    assert!(le.leader_elect);
    assert_eq!(le.resource_name, "kubesched");
    assert_eq!(le.resource_namespace, "kube-system");
    let profile = loaded
        .profile("kubesched")
        .expect("a profile named kubesched");
    let defaults = kubesched_config::default_config();
    assert_eq!(
        Some(profile),
        defaults
            .profiles
            .first()
            .map(|p| {
                let mut p = p.clone();
                p.scheduler_name = "kubesched".to_string();
                p
            })
            .as_ref(),
        "no plugin list: the default profile"
    );
}

#[test]
fn custom_configuration_validates_with_exactly_the_chosen_plugins() {
    let loaded = load(&rendered(&custom_options()));
    assert_eq!(
        loaded.config.leader_election.resource_name,
        "hint-scheduler"
    );
    assert_eq!(
        loaded.config.leader_election.resource_namespace,
        "scheduling"
    );
    let profile = loaded.profile("hint-scheduler").expect("the profile");
    let names: BTreeSet<String> = profile.plugin_names();
    let chosen: BTreeSet<String> = CUSTOM_PLUGINS.split(',').map(String::from).collect();
    assert_eq!(names, chosen, "exactly the chosen plugins are enabled");
    // Chosen default plugins keep their default-profile weights.
    let taint = profile
        .at(ExtensionPoint::Score)
        .iter()
        .find(|p| p.name == "TaintToleration")
        .expect("TaintToleration scores");
    assert_eq!(taint.weight, 3);
}

#[test]
fn coscheduling_brings_its_crd_its_rbac_and_replaces_priority_sort() {
    let sel = plugins::resolve("default,Coscheduling", &known()).expect("known plugins");
    assert!(sel.plugins.iter().all(|p| p.name != "PrioritySort"));
    assert!(sel.features.contains(&"plugin-coscheduling".to_string()));
    let opts = DeployOptions {
        plugins: Some(sel),
        plugins_arg: Some("default,Coscheduling".to_string()),
        ..DeployOptions::default()
    };
    let r = rendered(&opts);
    let docs = manifests(&r);
    // The CRD comes first, a whole apiextensions.k8s.io/v1 definition with its schema.
    assert_eq!(kind(&docs[0]), "CustomResourceDefinition");
    let crd = &docs[0];
    assert_eq!(
        crd.get("apiVersion").and_then(Yaml::as_str),
        Some("apiextensions.k8s.io/v1")
    );
    assert_eq!(
        crd.at(&["metadata", "name"]).and_then(Yaml::as_str),
        Some("podgroups.scheduling.x-k8s.io")
    );
    let crd_json = to_json(crd);
    let definition: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(crd_json.clone()).expect("a CustomResourceDefinition");
    let version = &definition.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("a schema");
    let props = schema.properties.as_ref().expect("properties");
    assert!(
        props["spec"]
            .properties
            .as_ref()
            .expect("spec")
            .contains_key("minMember")
    );
    assert!(
        props["status"]
            .properties
            .as_ref()
            .expect("status")
            .contains_key("phase")
    );
    assert!(
        version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );
    // RBAC from the declaration: read PodGroups, write their status.
    assert!(is_granted(
        &docs,
        "scheduling.x-k8s.io",
        "podgroups",
        &["get", "list", "watch"]
    ));
    assert!(is_granted(
        &docs,
        "scheduling.x-k8s.io",
        "podgroups/status",
        &["update", "patch"]
    ));
    // The configuration runs Coscheduling instead of PrioritySort, and validates.
    let names = load(&r)
        .profile("kubesched")
        .expect("profile")
        .plugin_names();
    assert!(names.contains("Coscheduling"));
    assert!(!names.contains("PrioritySort"));
    // Without --plugins, the default build has no Coscheduling: no CRD, no PodGroup access.
    let plain = manifests(&rendered(&DeployOptions::default()));
    assert!(plain.iter().all(|d| kind(d) != "CustomResourceDefinition"));
    assert!(!is_granted(
        &plain,
        "scheduling.x-k8s.io",
        "podgroups",
        &["list"]
    ));
}

#[test]
fn default_keyword_with_hint_node_validates() {
    let sel = plugins::resolve("default,HintNode", &known()).expect("known plugins");
    let opts = DeployOptions {
        plugins: Some(sel),
        plugins_arg: Some("default,HintNode".to_string()),
        ..DeployOptions::default()
    };
    let r = rendered(&opts);
    let loaded = load(&r);
    let names = loaded.profile("kubesched").expect("profile").plugin_names();
    assert!(names.contains("HintNode"));
    for (name, _) in plugins::DEFAULT_PLUGINS {
        if known().has(&plugins::feature_for(name)) {
            assert!(
                names.contains(*name),
                "default plugin {name} is still enabled"
            );
        }
    }
    assert!(
        r.file("examples/hint-node.yaml")
            .expect("rendered")
            .contains("This rendering compiles HintNode")
    );
}

#[test]
fn extra_config_is_kept_and_filled_in() {
    let extra = yaml::parse(
        r#"# packing instead of spreading
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 8
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
"#,
    )
    .expect("valid YAML");
    let opts = DeployOptions {
        extra_config: Some(ExtraConfig {
            source: "pack.yaml".to_string(),
            value: extra,
        }),
        ..DeployOptions::default()
    };
    let r = rendered(&opts);
    assert_eq!(r.notes, [render::chart_config_note("pack.yaml")]);
    let loaded = load(&r);
    assert_eq!(loaded.config.parallelism, 8);
    assert!(loaded.config.leader_election.leader_elect);
    assert_eq!(loaded.config.leader_election.resource_name, "kubesched");
    let profile = &loaded.config.profiles[0];
    assert_eq!(profile.scheduler_name, "kubesched");
    let fit = profile
        .plugin_config
        .iter()
        .find(|c| c.name == "NodeResourcesFit")
        .and_then(|c| c.args.as_ref())
        .expect("NodeResourcesFit args kept");
    assert_eq!(fit["scoringStrategy"]["type"], "MostAllocated");
    assert!(
        r.file(render::MANIFESTS_FILE)
            .expect("rendered")
            .contains("--config pack.yaml")
    );
}

#[test]
fn extra_config_problems_are_reported() {
    let check = |text: &str, replicas: u32, no_le: bool, expect: &str| {
        let opts = DeployOptions {
            extra_config: Some(ExtraConfig {
                source: "x.yaml".to_string(),
                value: yaml::parse(text).expect("valid YAML"),
            }),
            replicas,
            leader_election: !no_le,
            ..DeployOptions::default()
        };
        let err = xtask::deploy::render(&opts).expect_err("refused");
        assert_eq!(err.to_string(), expect);
    };
    check(
        "kind: Pod\n",
        1,
        false,
        "x.yaml: kind must be KubeSchedulerConfiguration",
    );
    check(
        "- a\n",
        1,
        false,
        "x.yaml: the configuration must be a map, found a list",
    );
    check(
        "profiles: {}\n",
        1,
        false,
        "x.yaml: profiles must be a list, found a map",
    );
    check(
        "profiles: [1]\n",
        1,
        false,
        "x.yaml: profiles[0] must be a map, found a number",
    );
    check(
        "leaderElection:\n  leaderElect: false\n",
        3,
        false,
        "3 replicas need leader election, or they would all schedule the same pods",
    );
    check(
        "{}\n",
        2,
        true,
        "2 replicas need leader election, or they would all schedule the same pods",
    );
}

#[test]
fn profiles_not_named_after_the_scheduler_are_reported() {
    let opts = DeployOptions {
        extra_config: Some(ExtraConfig {
            source: "two.yaml".to_string(),
            value: yaml::parse("profiles:\n- schedulerName: a\n- schedulerName: b\n")
                .expect("valid"),
        }),
        ..DeployOptions::default()
    };
    let r = rendered(&opts);
    assert_eq!(r.notes.len(), 2, "{:?}", r.notes);
    assert!(r.notes[0].contains("no profile of two.yaml is named kubesched"));
    assert_eq!(r.notes[1], render::chart_config_note("two.yaml"));
    // Both profiles are still valid.
    assert_eq!(load(&r).profiles.len(), 2);
}

#[test]
fn a_profile_with_its_own_plugins_keeps_them() {
    let opts = DeployOptions {
        extra_config: Some(ExtraConfig {
            source: "own.yaml".to_string(),
            value: yaml::parse(
                "profiles:\n- plugins:\n    score:\n      disabled:\n      - name: ImageLocality\n",
            )
            .expect("valid"),
        }),
        ..custom_options()
    };
    let r = rendered(&opts);
    assert_eq!(
        r.notes,
        [
            "profiles[0] of own.yaml lists its own plugins: --plugins only chooses the image's features for it".to_string(),
            render::chart_config_note("own.yaml"),
        ]
    );
    let text = config_text(&r);
    assert!(!text.contains("multiPoint"), "{text}");
    assert!(text.contains("name: ImageLocality"), "{text}");
}

#[test]
fn no_leader_election_turns_it_off() {
    let opts = DeployOptions {
        leader_election: false,
        extra_config: Some(ExtraConfig {
            source: "le.yaml".to_string(),
            value: yaml::parse("leaderElection:\n  leaderElect: true\n").expect("valid"),
        }),
        ..DeployOptions::default()
    };
    assert!(!load(&rendered(&opts)).config.leader_election.leader_elect);
}

// ---- agreement with the crates xtask does not link --------------------------------------

#[test]
fn default_plugin_table_is_current() {
    let path = xtask::workspace_root().join("xtask/src/default_plugins.rs");
    let current = std::fs::read_to_string(&path).expect("readable");
    let head_end = current
        .find("pub const DEFAULT_PLUGINS")
        .expect("the table's const");
    let mut text = current[..head_end].to_string();
    text.push_str("pub const DEFAULT_PLUGINS: &[(&str, Option<i32>)] = &[\n");
    let gates = kubesched_config::FeatureGates::defaults();
    for p in kubesched_config::DEFAULT_PLUGINS
        .iter()
        .filter(|p| p.gate.is_none_or(|g| gates.enabled(g)))
    {
        let weight = match p.weight {
            Some(w) => format!("Some({w})"),
            None => "None".to_string(),
        };
        text.push_str(&format!("    ({:?}, {weight}),\n", p.name));
    }
    text.push_str("];\n");
    if text != current {
        std::fs::write(&path, &text).expect("writable");
        panic!(
            "xtask/src/default_plugins.rs did not match kubesched_config::DEFAULT_PLUGINS; it \
             was rewritten: review it, then run `cargo xtask deploy` and the tests again"
        );
    }
}

#[test]
fn feature_rule_matches_the_registry() {
    let mut names: Vec<String> = known().features().map(plugins::name_for).collect();
    names.extend(plugins::DEFAULT_PLUGINS.iter().map(|(n, _)| n.to_string()));
    names.extend(
        [
            "CSILimits",
            "AzureDiskLimits",
            "EBSLimits",
            "GCEPDLimits",
            "Plugin2Go",
            "HTTPExtender",
        ]
        .map(String::from),
    );
    for name in &names {
        assert_eq!(
            plugins::feature_for(name),
            kubesched_framework::registry::feature_for(name),
            "{name}"
        );
    }
    // Every feature name reads back to a name that maps onto it.
    for f in known().features() {
        assert_eq!(plugins::feature_for(&plugins::name_for(f)), f);
    }
    // Every registered plugin has its feature on the binary.
    for d in kubesched_framework::registry::plugins() {
        assert!(
            known().has(&plugins::feature_for(d.name)),
            "{} has no feature",
            d.name
        );
    }
}

// ---- the checked-in deploy/ ------------------------------------------------------------

fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out
}

#[test]
fn checked_in_deploy_folder_is_up_to_date() {
    let dir = xtask::workspace_root().join(render::DEFAULT_OUT);
    let r = rendered(&DeployOptions::default());
    let expected: BTreeSet<String> = r.files.iter().map(|f| f.path.to_string()).collect();
    let present = files_under(&dir);
    let mut stale = Vec::new();
    for f in &r.files {
        match std::fs::read_to_string(dir.join(f.path)) {
            Ok(text) if text == f.contents => {}
            Ok(_) => stale.push(format!("{} differs", f.path)),
            Err(_) => stale.push(format!("{} is missing", f.path)),
        }
    }
    for extra in present.difference(&expected) {
        stale.push(format!("{extra} is not rendered any more"));
    }
    assert!(
        stale.is_empty(),
        "deploy/ is stale ({}): run `cargo xtask deploy`",
        stale.join(", ")
    );
}

/// The RBAC rows of one plugin's declarations, as the generated table lists them.
fn declared_rows(
    d: &kubesched_framework::registry::PluginDescriptor,
) -> Vec<(String, String, Vec<String>)> {
    const ORDER: [&str; 7] = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let mut rows: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut add = |group: &str, resource: String, verbs: &[&str]| {
        if verbs.is_empty() {
            return;
        }
        let i = match rows.iter().position(|r| r.0 == group && r.1 == resource) {
            Some(i) => i,
            None => {
                rows.push((group.to_string(), resource, Vec::new()));
                rows.len() - 1
            }
        };
        for v in verbs {
            if !rows[i].2.iter().any(|x| x == v) {
                rows[i].2.push(v.to_string());
            }
        }
        rows[i]
            .2
            .sort_by_key(|v| ORDER.iter().position(|o| o == v).unwrap_or(ORDER.len()));
    };
    for k in d.kinds {
        add(k.group, k.plural.to_string(), xtask::rbac::READ);
    }
    for w in d.writes {
        add(w.kind.group, w.kind.plural.to_string(), w.verbs);
        add(
            w.kind.group,
            format!("{}/status", w.kind.plural),
            w.status_verbs,
        );
    }
    rows.sort();
    rows
}

#[test]
fn plugin_access_table_is_current() {
    let path = xtask::workspace_root().join("xtask/src/plugin_kinds.rs");
    let current = std::fs::read_to_string(&path).expect("readable");
    let head_end = current
        .find("pub const PLUGIN_ACCESS")
        .expect("the table's const");
    let mut text = current[..head_end].to_string();
    text.push_str("pub const PLUGIN_ACCESS: &[PluginAccess] = &[\n");
    for d in kubesched_framework::registry::plugins() {
        let rows = declared_rows(d);
        if rows.is_empty() {
            continue;
        }
        text.push_str(&format!(
            "    PluginAccess {{\n        plugin: {:?},\n        rules: &[\n",
            d.name
        ));
        for (group, resource, verbs) in rows {
            text.push_str(&format!(
                "            Rule {{\n                api_group: {group:?},\n                resource: {resource:?},\n                verbs: &[{}],\n            }},\n",
                verbs
                    .iter()
                    .map(|v| format!("{v:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        text.push_str("        ],\n    },\n");
    }
    text.push_str("];\n");
    if text != current {
        std::fs::write(&path, &text).expect("writable");
        panic!(
            "xtask/src/plugin_kinds.rs did not match the plugins' kind declarations; it was \
             rewritten: review it, then run `cargo xtask deploy` and the tests again"
        );
    }
}

#[test]
fn rules_are_unique() {
    let mut seen = BTreeSet::new();
    for Rule {
        api_group,
        resource,
        ..
    } in RULES
    {
        assert!(
            seen.insert((api_group, resource)),
            "{api_group}/{resource} listed twice"
        );
    }
}
