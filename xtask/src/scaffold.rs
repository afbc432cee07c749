//! `cargo xtask new-plugin NAME --points Filter,Score [--args]`: a new plugin crate under
//! plugins/, wired into the binary, that builds and passes its own tests at once.
//!
//! The generated plugin has a small real behaviour per point the author asked for (Filter:
//! a node fits while it has room for one more pod; Score: emptier nodes score higher), with
//! table tests and an insta snapshot whose `.snap` file is written too, so `CI=true cargo
//! test` passes before the author changes anything. The author replaces the behaviour and
//! re-records the snapshot.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::plugins::feature_for;

/// The extension points the scaffold can write.
pub const SUPPORTED_POINTS: &[&str] = &["Filter", "Score"];

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPlugin {
    /// The plugin's name, UpperCamelCase (`RoomyNodes`).
    pub name: String,
    /// Whether it implements Filter.
    pub filter: bool,
    /// Whether it implements Score.
    pub score: bool,
    /// Whether it takes args (`<Name>Args`, with `maxPodsPerNode`).
    pub args: bool,
}

impl NewPlugin {
    /// Checks the name and the points (`Filter,Score`).
    pub fn new(name: &str, points: &str, args: bool) -> Result<Self, Error> {
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && name.chars().all(|c| c.is_ascii_alphanumeric());
        if !valid {
            return Err(Error::new(format!(
                "plugin name {name:?} must be UpperCamelCase letters and digits, like `RoomyNodes`"
            )));
        }
        let mut filter = false;
        let mut score = false;
        for point in points.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match point {
                "Filter" => filter = true,
                "Score" => score = true,
                other => {
                    return Err(Error::new(format!(
                        "--points: the scaffold writes {} (got {other:?}); add other points by hand, see docs/writing-a-plugin.md",
                        SUPPORTED_POINTS.join(", ")
                    )));
                }
            }
        }
        if !filter && !score {
            return Err(Error::new(format!(
                "--points names no point; choose from {}",
                SUPPORTED_POINTS.join(", ")
            )));
        }
        Ok(Self {
            name: name.to_string(),
            filter,
            score,
            args,
        })
    }

    /// The folder under plugins/ (`roomy-nodes`).
    pub fn folder(&self) -> String {
        feature_for(&self.name)
            .trim_start_matches(crate::plugins::FEATURE_PREFIX)
            .to_string()
    }

    /// The Cargo feature of the binary (`plugin-roomy-nodes`).
    pub fn feature(&self) -> String {
        feature_for(&self.name)
    }

    /// The package name (`kubesched-plugin-roomy-nodes`).
    pub fn package(&self) -> String {
        format!("kubesched-plugin-{}", self.folder())
    }

    fn crate_ident(&self) -> String {
        self.package().replace('-', "_")
    }
}

/// A file to write, relative to the workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Where, relative to the workspace root.
    pub path: PathBuf,
    /// What.
    pub contents: String,
}

/// Creates the crate and wires it into crates/cli under `root`. Refuses to overwrite a
/// folder that exists.
pub fn create(root: &Path, plugin: &NewPlugin) -> Result<Vec<PathBuf>, Error> {
    let dir = root.join("plugins").join(plugin.folder());
    if dir.exists() {
        return Err(Error::new(format!("{} exists already", dir.display())));
    }
    // crates/cli's build script derives the `use … as _;` line from the feature.
    let manifest_path = root.join("crates/cli/Cargo.toml");
    let manifest = read(&manifest_path)?;
    let manifest = wire_manifest(&manifest, plugin)?;
    let mut written = Vec::new();
    for file in files(plugin) {
        let path = root.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::new(format!("creating {}: {e}", parent.display())))?;
        }
        write(&path, &file.contents)?;
        written.push(file.path);
    }
    write(&manifest_path, &manifest)?;
    written.push(PathBuf::from("crates/cli/Cargo.toml"));
    Ok(written)
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::new(format!("reading {}: {e}", path.display())))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| Error::new(format!("writing {}: {e}", path.display())))
}

/// Inserts `line` among the consecutive lines of `text` that start with `prefix`, keeping
/// them sorted; `after` marks where the block starts.
fn insert_sorted(text: &str, after: &str, prefix: &str, line: &str) -> Result<String, Error> {
    let mut lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains(after))
        .ok_or_else(|| Error::new(format!("no line containing {after:?}")))?;
    let mut at = start + 1;
    while at < lines.len() && !lines[at].starts_with(prefix) {
        at += 1;
    }
    while at < lines.len() && lines[at].starts_with(prefix) && lines[at] < line {
        at += 1;
    }
    lines.insert(at, line);
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// crates/cli/Cargo.toml with the plugin's feature, its place in `all-plugins` and its
/// optional dependency.
pub fn wire_manifest(text: &str, plugin: &NewPlugin) -> Result<String, Error> {
    let feature = plugin.feature();
    let package = plugin.package();
    let text = insert_sorted(
        text,
        "all-plugins = [",
        "    \"plugin-",
        &format!("    \"{feature}\","),
    )?;
    let text = insert_sorted(
        &text,
        "# One feature per plugin crate",
        "plugin-",
        &format!("{feature} = [\"dep:{package}\"]"),
    )?;
    insert_sorted(
        &text,
        "[dependencies]",
        "kubesched-plugin-",
        &format!(
            "{package} = {{ path = \"../../plugins/{}\", optional = true }}",
            plugin.folder()
        ),
    )
}

/// The crate's files.
pub fn files(plugin: &NewPlugin) -> Vec<GeneratedFile> {
    let base = PathBuf::from("plugins").join(plugin.folder());
    let snap = base
        .join("src/snapshots")
        .join(format!("{}__tests__two_nodes.snap", plugin.crate_ident()));
    vec![
        GeneratedFile {
            path: base.join("Cargo.toml"),
            contents: cargo_toml(plugin),
        },
        GeneratedFile {
            path: base.join("src/lib.rs"),
            contents: lib_rs(plugin),
        },
        GeneratedFile {
            path: snap,
            contents: snapshot(plugin),
        },
    ]
}

fn cargo_toml(p: &NewPlugin) -> String {
    let serde = if p.args {
        "serde.workspace = true\n"
    } else {
        ""
    };
    let serde_json = if p.args {
        "serde_json.workspace = true\n"
    } else {
        ""
    };
    format!(
        "[package]\n\
         name = \"{package}\"\n\
         description = \"The {name} scheduling plugin\"\n\
         version.workspace = true\n\
         edition.workspace = true\n\
         rust-version.workspace = true\n\
         license.workspace = true\n\
         publish.workspace = true\n\
         \n\
         [lints]\n\
         workspace = true\n\
         \n\
         [dependencies]\n\
         kubesched-framework.workspace = true\n\
         {serde}\
         \n\
         [dev-dependencies]\n\
         kubesched-testing.workspace = true\n\
         insta.workspace = true\n\
         {serde_json}",
        package = p.package(),
        name = p.name,
    )
}

fn points_sentence(p: &NewPlugin) -> &'static str {
    match (p.filter, p.score) {
        (true, true) => {
            "Filter admits a node while it has room for one more pod; Score prefers the nodes with the fewest pods."
        }
        (true, false) => "Filter admits a node while it has room for one more pod.",
        _ => "Score prefers the nodes with the fewest pods.",
    }
}

fn lib_rs(p: &NewPlugin) -> String {
    let name = &p.name;
    let mut out = String::new();
    out.push_str(&format!(
        "//! {name}: {sentence}\n\
         //!\n\
         //! Generated by `cargo xtask new-plugin`: replace this behaviour with yours, keep one\n\
         //! table test per behaviour, and re-record the snapshot\n\
         //! (`INSTA_UPDATE=always cargo test -p {package}`, then read the `.snap` file).\n\
         //! docs/writing-a-plugin.md explains each part. It reads pods and nodes through the\n\
         //! model only and keeps no state between cycles.\n\n",
        sentence = points_sentence(p),
        package = p.package(),
    ));
    let mut framework = vec!["CycleState", "Handle", "PluginError"];
    if p.filter {
        framework.extend(["EnqueueExtensions", "FilterPlugin", "Status"]);
    }
    if p.score {
        framework.extend(["MAX_NODE_SCORE", "ScorePlugin"]);
        if !p.filter {
            framework.push("Status");
        }
    }
    framework.sort_by_key(|s| (s.chars().any(|c| c.is_ascii_lowercase()), *s));
    if p.filter {
        out.push_str(
            "use kubesched_framework::events::{ActionType, ClusterEventWithHint, EventResource};\n",
        );
    }
    out.push_str("use kubesched_framework::model::{NodeInfo, PodInfo};\n");
    out.push_str(&format!(
        "use kubesched_framework::{{{}}};\n\n",
        framework.join(", ")
    ));
    out.push_str(&format!(
        "/// The plugin's registered name: what a KubeSchedulerConfiguration enables.\n\
         pub const NAME: &str = \"{name}\";\n"
    ));
    if p.filter {
        out.push_str(
            "/// Filter's reason for a full node (counted per node in FailedScheduling messages).\n\
             pub const ERR_REASON_FULL: &str = \"node(s) had no room for another pod\";\n",
        );
    }
    out.push('\n');
    if p.args {
        out.push_str(&format!(
            "/// The plugin's args (`pluginConfig[].args` of kind `{name}Args`).\n\
             #[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]\n\
             #[serde(rename_all = \"camelCase\", default)]\n\
             pub struct {name}Args {{\n\
             \x20   /// The most pods a node takes, below its own allocatable `pods`.\n\
             \x20   pub max_pods_per_node: i64,\n\
             }}\n\n\
             impl Default for {name}Args {{\n\
             \x20   fn default() -> Self {{\n\
             \x20       Self {{\n\
             \x20           max_pods_per_node: 110,\n\
             \x20       }}\n\
             \x20   }}\n\
             }}\n\n\
             impl kubesched_framework::registry::PluginArgs for {name}Args {{\n\
             \x20   const KIND: &'static str = \"{name}Args\";\n\n\
             \x20   fn validate(\n\
             \x20       &self,\n\
             \x20       _gates: &kubesched_framework::features::FeatureGates,\n\
             \x20   ) -> Result<(), String> {{\n\
             \x20       if self.max_pods_per_node <= 0 {{\n\
             \x20           return Err(format!(\n\
             \x20               \"maxPodsPerNode: Invalid value: {{}}: must be greater than 0\",\n\
             \x20               self.max_pods_per_node\n\
             \x20           ));\n\
             \x20       }}\n\
             \x20       Ok(())\n\
             \x20   }}\n\
             }}\n\n"
        ));
        out.push_str(&format!(
            "/// The {name} plugin.\n\
             #[derive(Debug, Clone)]\n\
             pub struct {name} {{\n\
             \x20   max_pods_per_node: i64,\n\
             }}\n\n\
             impl {name} {{\n\
             \x20   /// Builds the plugin from its args.\n\
             \x20   pub fn new(args: &{name}Args, _handle: &Handle) -> Result<Self, PluginError> {{\n\
             \x20       Ok(Self {{\n\
             \x20           max_pods_per_node: args.max_pods_per_node,\n\
             \x20       }})\n\
             \x20   }}\n\n\
             \x20   /// How many pods the node takes: its allocatable `pods`, capped by the args.\n\
             \x20   fn capacity(&self, node: &NodeInfo) -> i64 {{\n\
             \x20       node.allocatable.allowed_pod_number.min(self.max_pods_per_node)\n\
             \x20   }}\n\
             }}\n\n\
             kubesched_framework::register_plugin! {{\n\
             \x20   name: NAME,\n\
             \x20   plugin: {name},\n\
             \x20   args: {name}Args,\n\
             \x20   factory: {name}::new,\n\
             }}\n\n"
        ));
    } else {
        out.push_str(&format!(
            "/// The {name} plugin. It keeps no state: everything it needs is on the node.\n\
             #[derive(Debug, Default, Clone, Copy)]\n\
             pub struct {name};\n\n\
             impl {name} {{\n\
             \x20   /// Builds the plugin (it needs nothing from the handle).\n\
             \x20   pub fn new(_handle: &Handle) -> Result<Self, PluginError> {{\n\
             \x20       Ok(Self)\n\
             \x20   }}\n\n\
             \x20   /// How many pods the node takes: its allocatable `pods`.\n\
             \x20   fn capacity(&self, node: &NodeInfo) -> i64 {{\n\
             \x20       node.allocatable.allowed_pod_number\n\
             \x20   }}\n\
             }}\n\n\
             kubesched_framework::register_plugin! {{\n\
             \x20   name: NAME,\n\
             \x20   plugin: {name},\n\
             \x20   factory: {name}::new,\n\
             }}\n\n"
        ));
    }
    if p.filter {
        out.push_str(&format!(
            "impl FilterPlugin for {name} {{\n\
             \x20   fn filter(&self, _state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {{\n\
             \x20       if (node.pods.len() as i64) < self.capacity(node) {{\n\
             \x20           Status::success()\n\
             \x20       }} else {{\n\
             \x20           // Unschedulable, not unresolvable: evicting a pod makes room.\n\
             \x20           Status::unschedulable(ERR_REASON_FULL)\n\
             \x20       }}\n\
             \x20   }}\n\
             }}\n\n\
             impl EnqueueExtensions for {name} {{\n\
             \x20   fn events_to_register(&self) -> Vec<ClusterEventWithHint> {{\n\
             \x20       // Room appears when a pod leaves a node or a node appears or grows.\n\
             \x20       vec![\n\
             \x20           ClusterEventWithHint::new(EventResource::AssignedPod, ActionType::DELETE),\n\
             \x20           ClusterEventWithHint::new(\n\
             \x20               EventResource::Node,\n\
             \x20               ActionType::ADD.union(ActionType::UPDATE_NODE_ALLOCATABLE),\n\
             \x20           ),\n\
             \x20       ]\n\
             \x20   }}\n\
             }}\n\n"
        ));
    }
    if p.score {
        out.push_str(&format!(
            "impl ScorePlugin for {name} {{\n\
             \x20   fn score(&self, _state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {{\n\
             \x20       let capacity = self.capacity(node);\n\
             \x20       if capacity <= 0 {{\n\
             \x20           return Ok(0);\n\
             \x20       }}\n\
             \x20       let free = (capacity - node.pods.len() as i64).max(0);\n\
             \x20       Ok(free * MAX_NODE_SCORE / capacity)\n\
             \x20   }}\n\
             }}\n\n"
        ));
    }
    out.push_str(&tests_rs(p));
    out
}

fn tests_rs(p: &NewPlugin) -> String {
    let name = &p.name;
    let build = if p.args {
        format!("{name}::new(&{name}Args::default(), &Handle::default()).expect(\"valid args\")")
    } else {
        name.to_string()
    };
    let mut out = String::from(
        "#[cfg(test)]\n\
         mod tests {\n\
         \x20   use super::*;\n\
         \x20   use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info};\n\n\
         \x20   /// A node that takes `capacity` pods and runs `running` of them.\n\
         \x20   fn node(name: &str, capacity: u32, running: usize) -> std::sync::Arc<NodeInfo> {\n\
         \x20       let pods: Vec<_> = (0..running)\n\
         \x20           .map(|i| PodBuilder::new(&format!(\"{name}-pod-{i}\")).node(name).info())\n\
         \x20           .collect();\n\
         \x20       let capacity = capacity.to_string();\n\
         \x20       node_info(NodeBuilder::new(name).capacity(&[(\"pods\", capacity.as_str())]), &pods)\n\
         \x20   }\n\n",
    );
    if p.filter {
        out.push_str(&format!(
            "\x20   /// One row: a node's capacity and running pods, and whether it admits one more.\n\
             \x20   fn check_filter(capacity: u32, running: usize, fits: bool) {{\n\
             \x20       let n = node(\"n1\", capacity, running);\n\
             \x20       let run = PluginHarness::new({build}).run(&PodBuilder::new(\"p\").info(), &[n]);\n\
             \x20       let status = run.filter_of(\"n1\").expect(\"filter ran\");\n\
             \x20       if fits {{\n\
             \x20           assert_eq!(status.code, \"Success\", \"{{capacity}} pods, {{running}} running\");\n\
             \x20       }} else {{\n\
             \x20           assert_eq!(status.code, \"Unschedulable\", \"{{capacity}} pods, {{running}} running\");\n\
             \x20           assert_eq!(status.reasons, [ERR_REASON_FULL]);\n\
             \x20       }}\n\
             \x20   }}\n\n\
             \x20   #[test]\n\
             \x20   fn filter_table() {{\n\
             \x20       check_filter(2, 0, true);\n\
             \x20       check_filter(2, 1, true);\n\
             \x20       check_filter(2, 2, false);\n\
             \x20       check_filter(0, 0, false);\n\
             \x20   }}\n\n"
        ));
    }
    if p.score {
        out.push_str(&format!(
            "\x20   #[test]\n\
             \x20   fn score_prefers_emptier_nodes() {{\n\
             \x20       let nodes = [node(\"empty\", 4, 0), node(\"half\", 4, 2), node(\"full\", 4, 4)];\n\
             \x20       let run = PluginHarness::new({build}).run(&PodBuilder::new(\"p\").info(), &nodes);\n\
             \x20       assert_eq!(run.score_of(\"empty\"), Some(MAX_NODE_SCORE));\n\
             \x20       assert_eq!(run.score_of(\"half\"), Some(MAX_NODE_SCORE / 2));\n"
        ));
        if p.filter {
            out.push_str("        assert_eq!(run.score_of(\"full\"), None, \"filtered out\");\n");
        } else {
            out.push_str("        assert_eq!(run.score_of(\"full\"), Some(0));\n");
        }
        out.push_str("    }\n\n");
    }
    if p.args {
        out.push_str(&format!(
            "\x20   #[test]\n\
             \x20   fn args_defaults_and_validation() {{\n\
             \x20       use kubesched_framework::registry::PluginArgs;\n\
             \x20       let args: {name}Args = serde_json::from_value(serde_json::json!({{}})).expect(\"decodes\");\n\
             \x20       assert_eq!(args, {name}Args::default());\n\
             \x20       let bad = {name}Args {{ max_pods_per_node: 0 }};\n\
             \x20       assert_eq!(\n\
             \x20           bad.validate(&kubesched_framework::features::FeatureGates::defaults()),\n\
             \x20           Err(\"maxPodsPerNode: Invalid value: 0: must be greater than 0\".to_string())\n\
             \x20       );\n\
             \x20   }}\n\n"
        ));
    }
    out.push_str(
        "    /// Everything the plugin says about one pod on two nodes, built through the registry\n\
         \x20   /// (which proves the registration works).\n\
         \x20   #[test]\n\
         \x20   fn two_nodes() {\n\
         \x20       let harness = PluginHarness::from_registry(NAME, None, kubesched_framework::Handle::builder())\n\
         \x20           .expect(\"registered\");\n\
         \x20       let run = harness.run(&PodBuilder::new(\"p\").info(), &[node(\"n1\", 2, 2), node(\"n2\", 2, 1)]);\n\
         \x20       insta::assert_yaml_snapshot!(\"two_nodes\", run);\n\
         \x20   }\n\
         }\n",
    );
    out
}

/// The snapshot `two_nodes` records (what the generated behaviour gives).
fn snapshot(p: &NewPlugin) -> String {
    let mut out = format!(
        "---\nsource: plugins/{}/src/lib.rs\nexpression: run\n---\nplugin: {}\npod: default/p\nnodes:\n",
        p.folder(),
        p.name
    );
    let node = |name: &str, fits: bool, score: i64| {
        let mut s = format!("  - node: {name}\n");
        if p.filter {
            if fits {
                s.push_str("    filter:\n      code: Success\n");
            } else {
                s.push_str(
                    "    filter:\n      code: Unschedulable\n      reasons:\n        - node(s) had no room for another pod\n",
                );
            }
        }
        if p.score && (fits || !p.filter) {
            s.push_str(&format!(
                "    score: {score}\n    normalized_score: {score}\n"
            ));
        }
        s
    };
    out.push_str(&node("n1", false, 0));
    out.push_str(&node("n2", true, 50));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_points_are_checked() {
        let p = NewPlugin::new("RoomyNodes", "Filter,Score", false).expect("valid");
        assert_eq!(p.folder(), "roomy-nodes");
        assert_eq!(p.package(), "kubesched-plugin-roomy-nodes");
        assert!(NewPlugin::new("roomy", "Filter", false).is_err());
        assert!(NewPlugin::new("Roomy-Nodes", "Filter", false).is_err());
        let err = NewPlugin::new("Roomy", "Filter,Permit", false).expect_err("unsupported");
        assert!(err.to_string().contains("Permit"), "{err}");
        assert!(NewPlugin::new("Roomy", "", false).is_err());
    }

    #[test]
    fn wiring_keeps_the_lists_sorted() {
        let manifest = "[features]\nall-plugins = [\n    \"plugin-a\",\n    \"plugin-z\",\n]\n# One feature per plugin crate, sorted.\nplugin-a = [\"dep:kubesched-plugin-a\"]\nplugin-z = [\"dep:kubesched-plugin-z\"]\n\n[dependencies]\nclap.workspace = true\nkubesched-plugin-a = { path = \"../../plugins/a\", optional = true }\nkubesched-plugin-z = { path = \"../../plugins/z\", optional = true }\n";
        let p = NewPlugin::new("Middle", "Filter", false).expect("valid");
        let wired = wire_manifest(manifest, &p).expect("wired");
        let want = "[features]\nall-plugins = [\n    \"plugin-a\",\n    \"plugin-middle\",\n    \"plugin-z\",\n]\n# One feature per plugin crate, sorted.\nplugin-a = [\"dep:kubesched-plugin-a\"]\nplugin-middle = [\"dep:kubesched-plugin-middle\"]\nplugin-z = [\"dep:kubesched-plugin-z\"]\n\n[dependencies]\nclap.workspace = true\nkubesched-plugin-a = { path = \"../../plugins/a\", optional = true }\nkubesched-plugin-middle = { path = \"../../plugins/middle\", optional = true }\nkubesched-plugin-z = { path = \"../../plugins/z\", optional = true }\n";
        assert_eq!(wired, want);
    }
}
