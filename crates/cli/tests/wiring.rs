//! The binary's plugin wiring: every crate under plugins/ has its feature (crates/cli/Cargo.toml,
//! the one list Cargo cannot derive; build.rs derives the linking lines and the offered
//! features from it), and the default build registers exactly the in-tree plugins.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kubesched::framework::registry;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn plugin_folders() -> BTreeSet<String> {
    std::fs::read_dir(workspace().join("plugins"))
        .expect("plugins/ exists")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Whether a plugin crate stays out of the default build: its Cargo.toml says so under
/// `[package.metadata.kubesched]` with `opt-in = true`.
fn opt_in(folder: &str) -> bool {
    std::fs::read_to_string(workspace().join("plugins").join(folder).join("Cargo.toml"))
        .expect("read")
        .lines()
        .any(|l| l.replace(' ', "") == "opt-in=true")
}

#[test]
fn every_plugin_crate_has_its_feature_and_is_offered() {
    let manifest =
        std::fs::read_to_string(workspace().join("crates/cli/Cargo.toml")).expect("read");
    let offered = registry::offered_features();
    let all_plugins = manifest
        .split("all-plugins = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("an all-plugins feature");
    for folder in plugin_folders() {
        let feature = format!("plugin-{folder}");
        let krate = format!("kubesched-plugin-{folder}");
        assert!(
            manifest.contains(&format!("{feature} = [\"dep:{krate}\"]")),
            "crates/cli/Cargo.toml lacks the feature `{feature} = [\"dep:{krate}\"]`"
        );
        if opt_in(&folder) {
            assert!(
                !all_plugins.contains(&format!("\"{feature}\"")),
                "\"{feature}\" is opt-in (its Cargo.toml says so) but the all-plugins feature lists it"
            );
        } else {
            assert!(
                all_plugins.contains(&format!("\"{feature}\"")),
                "the all-plugins feature lacks \"{feature}\""
            );
        }
        assert!(
            manifest.contains(&format!(
                "{krate} = {{ path = \"../../plugins/{folder}\", optional = true }}"
            )),
            "crates/cli/Cargo.toml lacks the optional dependency on {krate}"
        );
        assert!(
            offered.contains(&feature.as_str()),
            "the binary does not offer {feature} (crates/cli/build.rs reads the features of crates/cli/Cargo.toml): {offered:?}"
        );
    }
    // And nothing is offered that no crate backs: each offered feature's crate is a
    // folder under plugins/ or the out-of-tree example.
    for feature in &offered {
        let folder = feature.trim_start_matches("plugin-");
        assert!(
            workspace().join("plugins").join(folder).is_dir() || *feature == "plugin-hint-node",
            "{feature} is offered but plugins/{folder} does not exist"
        );
    }
}

#[test]
fn default_build_registers_each_in_tree_plugin_once() {
    registry::check_unique().expect("no duplicate plugin names");
    let registered: BTreeSet<String> = registry::plugins()
        .iter()
        .map(|d| registry::feature_for(d.name))
        .collect();
    let expected: BTreeSet<String> = plugin_folders()
        .into_iter()
        .filter(|f| !opt_in(f))
        .map(|f| format!("plugin-{f}"))
        .collect();
    assert_eq!(registered, expected);
}

#[test]
fn plugins_command_lists_sorted_names_with_points() {
    let out = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .arg("plugins")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(text.contains("NodeName"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("NodeName") && l.contains("Filter"))
    );
}

/// The binary describes itself (`kubesched plugins -o json`), and what is written by hand
/// elsewhere is checked against that description: each plugin's feature in
/// crates/cli/Cargo.toml (which build.rs turns into the linking line and the offered
/// features), and xtask's default-profile table naming only plugins that exist. xtask links
/// the plugins through this crate's library, so it lists none.
#[test]
fn the_plugins_description_agrees_with_every_hand_written_list() {
    let out = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .args(["plugins", "-o", "json"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let described: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let plugins = described["plugins"].as_array().expect("a list");
    assert!(plugins.len() >= 18, "{described:#}");

    let read = |path: &str| std::fs::read_to_string(workspace().join(path)).expect(path);
    let cli_manifest = read("crates/cli/Cargo.toml");
    let xtask_defaults = read("xtask/src/default_plugins.rs");
    let offered = registry::offered_features();
    let mut names = BTreeSet::new();
    for p in plugins {
        let name = p["name"].as_str().expect("name");
        let feature = p["feature"].as_str().expect("feature");
        let krate = p["crate"].as_str().expect("crate");
        names.insert(name.to_string());
        assert_eq!(feature, registry::feature_for(name), "{name}");
        assert!(
            cli_manifest.contains(&format!("\n{feature} = [\"dep:{krate}\"]")),
            "{name}: crates/cli/Cargo.toml has no `{feature} = [\"dep:{krate}\"]`"
        );
        assert!(
            offered.contains(&feature),
            "{name}: {feature} is not among the offered features {offered:?}"
        );
        assert!(
            !p["extensionPoints"].as_array().expect("points").is_empty(),
            "{name} implements no extension point"
        );
    }
    // No second copy of the plugin list: xtask takes the binary's default set through its
    // library and names only the opt-in crates it renders for. It must not turn on an opt-in
    // feature of `kubesched`: Cargo unifies features across the workspace, so every binary
    // of `cargo test --workspace` (these tests among them) would link that plugin too.
    let opt_in_crates: BTreeSet<String> = plugin_folders()
        .into_iter()
        .filter(|f| opt_in(f))
        .map(|f| format!("kubesched-plugin-{f}"))
        .chain(["kubesched-plugin-hint-node".to_string()])
        .collect();
    for path in ["xtask/Cargo.toml", "xtask/tests/deploy.rs"] {
        let text = read(path);
        for named in text
            .match_indices("kubesched-plugin-")
            .chain(text.match_indices("kubesched_plugin_"))
            .map(|(at, _)| {
                text[at..]
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                    .next()
                    .unwrap_or_default()
                    .replace('_', "-")
            })
        {
            assert!(
                opt_in_crates.contains(&named),
                "{path} names the default plugin crate {named}: link the binary's set through `kubesched` instead"
            );
        }
    }
    let xtask_manifest = read("xtask/Cargo.toml");
    let kubesched_dep = xtask_manifest
        .lines()
        .find(|l| l.starts_with("kubesched = "))
        .expect("xtask depends on kubesched");
    for feature in offered.iter().filter(|f| {
        let folder = f.trim_start_matches("plugin-");
        **f == "plugin-hint-node" || opt_in(folder)
    }) {
        assert!(
            !kubesched_dep.contains(&format!("\"{feature}\"")),
            "xtask/Cargo.toml turns on kubesched's opt-in feature {feature}, which every workspace build would then link: depend on its crate instead"
        );
    }
    let table = xtask_defaults
        .split("pub const DEFAULT_PLUGINS")
        .nth(1)
        .and_then(|rest| rest.split("];").next())
        .expect("xtask's DEFAULT_PLUGINS");
    for quoted in table.split('"').skip(1).step_by(2) {
        assert!(
            names.contains(quoted),
            "xtask's DEFAULT_PLUGINS names {quoted}, which this binary does not have"
        );
    }
}

fn kubesched(args: &[&str], stdin_file: Option<(&str, &str)>) -> (bool, String, String) {
    let dir = std::env::temp_dir().join(format!("kubesched-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubesched"));
    for a in args {
        if let Some((name, text)) = stdin_file
            && *a == name
        {
            let p = dir.join(name);
            std::fs::write(&p, text).expect("write");
            cmd.arg(p);
            continue;
        }
        cmd.arg(a);
    }
    let out = cmd.output().expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_issue_example_config_validates() {
    let cfg = "apiVersion: kubescheduler.config.k8s.io/v1
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
";
    let (ok, stdout, stderr) = kubesched(
        &["config", "validate", "sched.yaml"],
        Some(("sched.yaml", cfg)),
    );
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("valid"), "{stdout}");
}

#[test]
fn a_missing_plugin_is_refused_with_its_feature() {
    let cfg = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gang
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
";
    let (ok, _, stderr) = kubesched(
        &["config", "validate", "missing.yaml"],
        Some(("missing.yaml", cfg)),
    );
    assert!(!ok);
    assert!(stderr.contains("Coscheduling"), "{stderr}");
    assert!(stderr.contains("plugin-coscheduling"), "{stderr}");
    assert!(stderr.contains("missing.yaml"), "{stderr}");
}

#[test]
fn config_defaults_prints_a_valid_configuration() {
    let (ok, stdout, stderr) = kubesched(&["config", "defaults"], None);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("kind: KubeSchedulerConfiguration"),
        "{stdout}"
    );
    // The feature gates in effect head the output, as comments.
    assert!(
        stdout.contains("#   SchedulerAsyncPreemption=true (BETA - default=true)\n"),
        "{stdout}"
    );
    let (ok, out, err) = kubesched(
        &["config", "validate", "defaults.yaml"],
        Some(("defaults.yaml", &stdout)),
    );
    assert!(ok, "{out}{err}");
}

#[test]
fn config_migrate_prints_v1_and_validate_warns_about_v1beta3() {
    let beta = "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\nparallelism: 4\n";
    let (ok, stdout, stderr) = kubesched(
        &["config", "migrate", "beta.yaml"],
        Some(("beta.yaml", beta)),
    );
    assert!(ok, "{stderr}");
    assert!(
        stdout.starts_with("apiVersion: kubescheduler.config.k8s.io/v1\n"),
        "{stdout}"
    );
    assert!(stdout.contains("parallelism: 4"), "{stdout}");
    let (ok, out, err) = kubesched(
        &["config", "validate", "v1.yaml"],
        Some(("v1.yaml", &stdout)),
    );
    assert!(ok, "{out}{err}");
    assert!(!err.contains("v1beta3"), "{err}");
    let (ok, _, err) = kubesched(
        &["config", "validate", "beta.yaml"],
        Some(("beta.yaml", beta)),
    );
    assert!(ok);
    assert!(
        err.contains("v1beta3 was removed in Kubernetes v1.29"),
        "{err}"
    );
}

#[test]
fn emulated_version_picks_that_releases_gates() {
    // v1.37 by default: StorageCapacityScoring is beta and on, GangScheduling is gone.
    let (ok, stdout, stderr) = kubesched(&["config", "defaults"], None);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("# Kubernetes release emulated (set with --emulated-version): 1.37\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   StorageCapacityScoring=true (BETA - default=true)\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("GangScheduling"), "{stdout}");
    // v1.34 restores v1.34's gates.
    let (ok, stdout, stderr) =
        kubesched(&["config", "defaults", "--emulated-version", "1.34"], None);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("# Kubernetes release emulated (set with --emulated-version): 1.34\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   StorageCapacityScoring=false (ALPHA - default=false)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   SidecarContainers=true (GA - default=true, locked)\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("OpportunisticBatching"), "{stdout}");
    // v1.36 still has GangScheduling; a gate of a later release is refused.
    let (ok, _, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--emulated-version",
            "kube=1.36",
            "--feature-gates",
            "GangScheduling=true",
        ],
        None,
    );
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--emulated-version",
            "1.34",
            "--feature-gates",
            "OpportunisticBatching=false",
        ],
        None,
    );
    assert!(!ok);
    assert!(
        stderr.contains("feature is PreAlpha at emulated version 1.34"),
        "{stderr}"
    );
    let (ok, _, stderr) = kubesched(&["config", "defaults", "--emulated-version", "1.30"], None);
    assert!(!ok);
    assert!(
        stderr.contains("emulation version 1.30 is not between [1.34, 1.37]"),
        "{stderr}"
    );
}

#[test]
fn feature_gates_are_parsed_shown_and_checked() {
    let (ok, stdout, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--feature-gates",
            "SchedulerAsyncPreemption=false,SchedulerPopFromBackoffQ=false",
        ],
        None,
    );
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("#   SchedulerAsyncPreemption=false (BETA - default=true)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   SchedulerPopFromBackoffQ=false (BETA - default=true)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   SchedulerQueueingHints=true (GA - default=true, locked)\n"),
        "{stdout}"
    );
    assert!(
        !stderr.contains("feature gate"),
        "both gates take effect: {stderr}"
    );
    // Unknown and locked gates are refused, as upstream refuses them.
    let (ok, _, stderr) = kubesched(
        &["config", "defaults", "--feature-gates", "Bogus=true"],
        None,
    );
    assert!(!ok);
    assert!(
        stderr.contains("unrecognized feature gate: Bogus"),
        "{stderr}"
    );
    let (ok, _, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--feature-gates",
            "SchedulerQueueingHints=false",
        ],
        None,
    );
    assert!(!ok);
    assert!(stderr.contains("locked to true"), "{stderr}");
    // A known gate kubesched cannot act on is accepted with a warning. DRAPrioritizedList
    // is GA and locked in v1.37, so the case runs at v1.36, where it could still be set.
    let (ok, _, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--emulated-version",
            "1.36",
            "--feature-gates",
            "DRAPrioritizedList=false",
        ],
        None,
    );
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("DRAPrioritizedList is set away from its default, but kubesched does not change its behaviour for it"),
        "{stderr}"
    );
    let (ok, _, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--feature-gates",
            "DRAPrioritizedList=false",
        ],
        None,
    );
    assert!(!ok);
    assert!(stderr.contains("locked to true"), "{stderr}");
    let (ok, _, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--feature-gates",
            "DRASchedulerFilterTimeout=false",
        ],
        None,
    );
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("DRASchedulerFilterTimeout is set away from its default, but kubesched does not change its behaviour for it"),
        "{stderr}"
    );
}

#[test]
fn what_if_flags_answer_in_json_and_exclude_each_other() {
    let root = workspace();
    let cluster = root.join("examples/what-if/cluster");
    let cluster = cluster.to_str().expect("utf-8 path");
    let pending = root.join("examples/what-if/pending.yaml");
    let template = root.join("examples/what-if/new-node.yaml");
    let (ok, stdout, stderr) = kubesched(
        &[
            "simulate",
            cluster,
            pending.to_str().expect("utf-8"),
            "--add-nodes",
            template.to_str().expect("utf-8"),
            "--max",
            "4",
            "-o",
            "json",
        ],
        None,
    );
    assert!(ok, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(json["what_if"]["question"], "add-nodes");
    assert_eq!(json["what_if"]["nodes_to_add"], 2);

    let (ok, stdout, stderr) = kubesched(
        &["simulate", cluster, "--drain", "node-1", "--no-timing"],
        None,
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("What if: drain node-1"), "{stdout}");

    let (ok, stdout, stderr) = kubesched(
        &[
            "simulate",
            cluster,
            "--scale-workload",
            "sts/shop/db=3",
            "-o",
            "yaml",
        ],
        None,
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("question: scale-workload"), "{stdout}");

    let (ok, _, stderr) = kubesched(
        &[
            "simulate",
            cluster,
            "--drain",
            "node-1",
            "--scale-workload",
            "sts/shop/db=3",
        ],
        None,
    );
    assert!(!ok);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let (ok, _, stderr) = kubesched(&["simulate", cluster, "--scale-workload", "pod/x=1"], None);
    assert!(!ok);
    assert!(stderr.contains("KIND/NAMESPACE/NAME=REPLICAS"), "{stderr}");
}

#[test]
fn dynamic_resources_args_are_read_and_validated() {
    let cfg = |args: &str| {
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: DynamicResources
    args:
{args}
"
        )
    };
    let good = cfg("      filterTimeout: 30s\n      bindingTimeout: 5m");
    let (ok, stdout, stderr) = kubesched(
        &["config", "validate", "dra.yaml"],
        Some(("dra.yaml", &good)),
    );
    assert!(ok, "{stdout}{stderr}");
    let bad = cfg("      filterTimeout: -1s");
    let (ok, stdout, stderr) = kubesched(
        &["config", "validate", "dra-bad.yaml"],
        Some(("dra-bad.yaml", &bad)),
    );
    assert!(!ok, "{stdout}{stderr}");
    assert!(
        stderr.contains("filterTimeout: Invalid value: \"-1s\": must be zero or positive"),
        "{stderr}"
    );
}

#[test]
fn plugin_args_defaults_follow_the_emulated_release() {
    // The args of one plugin in `config defaults`, from its `kind:` line to the next entry.
    fn args_of<'a>(yaml: &'a str, kind: &str) -> &'a str {
        let start = yaml
            .find(&format!("kind: {kind}"))
            .unwrap_or_else(|| panic!("no {kind} in {yaml}"));
        let rest = &yaml[start..];
        &rest[..rest.find("- name:").unwrap_or(rest.len())]
    }
    // v1.37: StorageCapacityScoring fills in VolumeBinding's shape, DRADeviceBindingConditions
    // DynamicResources' bindingTimeout, as upstream's /configz shows them.
    let (ok, v1_37, stderr) = kubesched(&["config", "defaults"], None);
    assert!(ok, "{stderr}");
    let volume = args_of(&v1_37, "VolumeBindingArgs");
    assert!(volume.contains("shape:"), "{volume}");
    assert!(volume.contains("score: 10"), "{volume}");
    let dra = args_of(&v1_37, "DynamicResourcesArgs");
    assert!(dra.contains("bindingTimeout: 10m0s"), "{dra}");
    assert!(dra.contains("filterTimeout: 10s"), "{dra}");
    // v1.35: both gates were off, so neither default is there.
    let (ok, v1_35, stderr) =
        kubesched(&["config", "defaults", "--emulated-version", "1.35"], None);
    assert!(ok, "{stderr}");
    assert!(
        !args_of(&v1_35, "VolumeBindingArgs").contains("shape:"),
        "{v1_35}"
    );
    let dra = args_of(&v1_35, "DynamicResourcesArgs");
    assert!(!dra.contains("bindingTimeout"), "{dra}");
    assert!(dra.contains("filterTimeout: 10s"), "{dra}");
    // What v1.37 printed is a configuration v1.37 reads, and v1.35 refuses, as upstream
    // refuses a field whose gate is off.
    let (ok, stdout, stderr) = kubesched(
        &["config", "validate", "v1_37.yaml"],
        Some(("v1_37.yaml", &v1_37)),
    );
    assert!(ok, "{stdout}{stderr}");
    let (ok, stdout, stderr) = kubesched(
        &[
            "config",
            "validate",
            "--emulated-version",
            "1.35",
            "v1_37.yaml",
        ],
        Some(("v1_37.yaml", &v1_37)),
    );
    assert!(!ok, "{stdout}");
    assert!(
        stderr.contains("unsupported when StorageCapacityScoring feature is disabled"),
        "{stderr}"
    );
    assert!(
        stderr.contains("bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"),
        "{stderr}"
    );
}

#[test]
fn gate_flags_are_refused_where_they_would_do_nothing() {
    for args in [
        &["plugins", "--feature-gates", "OpportunisticBatching=false"][..],
        &["bench", "--emulated-version", "1.35", "--filter", "x"][..],
    ] {
        let (ok, _, stderr) = kubesched(args, None);
        assert!(!ok, "{args:?}");
        assert!(stderr.contains("have no effect on `kubesched"), "{stderr}");
    }
    let (ok, stdout, stderr) = kubesched(&["plugins"], None);
    assert!(ok, "{stdout}{stderr}");
}

#[test]
fn pods_of_a_scheduler_no_profile_serves_are_named_not_silently_dropped() {
    let input = "apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  schedulerName: my-scheduler
  containers: [{name: c, image: x}]
";
    let (ok, _, stderr) = kubesched(
        &["simulate", "other.yaml", "--no-timing"],
        Some(("other.yaml", input)),
    );
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("1 pending pod names scheduler \"my-scheduler\", which no profile of the configuration is (default/p)"),
        "{stderr}"
    );
}

#[test]
fn min_compatibility_version_is_checked_against_the_emulated_one() {
    let (ok, _, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--min-compatibility-version",
            "kube=1.36",
        ],
        None,
    );
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = kubesched(
        &[
            "config",
            "defaults",
            "--emulated-version",
            "1.35",
            "--min-compatibility-version",
            "1.36",
        ],
        None,
    );
    assert!(!ok);
    assert!(
        stderr.contains("must be less or equal to the emulated-version (1.35)"),
        "{stderr}"
    );
    let (ok, _, stderr) = kubesched(
        &["config", "defaults", "--min-compatibility-version", "1.2"],
        None,
    );
    assert!(!ok);
    assert!(stderr.contains("not a release kubesched knows"), "{stderr}");
}
