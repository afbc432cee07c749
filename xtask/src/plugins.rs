//! Plugin names → Cargo features of the `kubesched` binary.
//!
//! xtask does not link the framework (it would drag the scheduler's dependencies into a
//! tool that only writes files), so it repeats the registry's one-line naming rule
//! (`NodeResourcesFit` → `plugin-node-resources-fit`, a test checks it agrees with
//! `kubesched_framework::registry::feature_for`) and checks every name against the features
//! crates/cli/Cargo.toml really declares, refusing unknown names with the list of known ones.

use std::collections::BTreeSet;

use crate::Error;

/// Prefix of every plugin feature of the `kubesched` crate.
pub const FEATURE_PREFIX: &str = "plugin-";

/// The registry backend feature every build needs (`inventory` is the binary's default).
pub const REGISTRY_FEATURE: &str = "inventory";

/// The features of the default build: the registry backend and every in-tree plugin.
pub const DEFAULT_FEATURES: &str = "inventory,all-plugins";

/// The keyword that stands for upstream's default plugins in a `--plugins` list.
pub const DEFAULT_KEYWORD: &str = "default";

pub use crate::default_plugins::DEFAULT_PLUGINS;

/// The feature that compiles plugin `name` in: `plugin-` and the kebab-case of the name. A
/// capital starts a new word after a lowercase letter or digit, and the last capital of a
/// run of capitals starts a new word when a lowercase letter follows (`CSILimits` →
/// `plugin-csi-limits`).
pub fn feature_for(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::from(FEATURE_PREFIX);
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_uppercase() {
            out.push(c);
            continue;
        }
        if i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push('-');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// The plugin name a feature most likely stands for (`plugin-node-name` → `NodeName`); used
/// only to list known plugins in messages. Acronyms come out capitalised as words.
pub fn name_for(feature: &str) -> String {
    feature
        .strip_prefix(FEATURE_PREFIX)
        .unwrap_or(feature)
        .split('-')
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

/// The names of the `[features]` table of a Cargo manifest, in file order. A deliberately
/// small reader: keys at the start of a line inside `[features]`; continuation lines of
/// multi-line arrays start with whitespace or a quote and are skipped.
pub fn manifest_features(manifest: &str) -> Vec<String> {
    let mut in_features = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && !line.starts_with(char::is_whitespace) {
            in_features = trimmed == "[features]";
            continue;
        }
        if !in_features || line.starts_with(char::is_whitespace) {
            continue;
        }
        if let Some((key, _)) = line.split_once('=') {
            let key = key.trim();
            if !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                out.push(key.to_string());
            }
        }
    }
    out
}

/// The plugin features a build of `kubesched` can choose from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownPlugins {
    features: BTreeSet<String>,
}

impl KnownPlugins {
    /// The `plugin-*` features of crates/cli/Cargo.toml (given as text).
    pub fn from_manifest(manifest: &str) -> Self {
        Self {
            features: manifest_features(manifest)
                .into_iter()
                .filter(|f| f.starts_with(FEATURE_PREFIX))
                .collect(),
        }
    }

    /// Whether `feature` exists.
    pub fn has(&self, feature: &str) -> bool {
        self.features.contains(feature)
    }

    /// Every known plugin feature, sorted.
    pub fn features(&self) -> impl Iterator<Item = &str> {
        self.features.iter().map(String::as_str)
    }

    /// Upstream's default plugins this build can compile in, in default-profile order.
    pub fn defaults(&self) -> Vec<&'static str> {
        DEFAULT_PLUGINS
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| self.has(&feature_for(name)))
            .collect()
    }
}

/// One plugin of a chosen set, as it goes into `multiPoint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// The plugin name.
    pub name: String,
    /// Its default-profile weight, when it has one.
    pub weight: Option<i32>,
}

/// A resolved `--plugins` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The plugins in `multiPoint` order: upstream's defaults in upstream's order, then the
    /// others in the order given.
    pub plugins: Vec<Chosen>,
    /// Their features, sorted, without the registry backend.
    pub features: Vec<String>,
    /// Whether the set is exactly upstream's defaults this build can have, so the
    /// configuration needs no plugin list.
    pub is_default_set: bool,
}

impl Selection {
    /// The value of `cargo build --features`: the registry backend, then the plugins.
    pub fn cargo_features(&self) -> String {
        std::iter::once(REGISTRY_FEATURE)
            .chain(self.features.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Resolves a comma list of plugin names (`default` stands for upstream's default plugins
/// that exist as features). Unknown names are refused, all at once, with the known ones.
pub fn resolve(list: &str, known: &KnownPlugins) -> Result<Selection, Error> {
    let mut given: Vec<String> = Vec::new();
    for raw in list.split(',') {
        let name = raw.trim();
        if name.is_empty() {
            continue;
        }
        if name == DEFAULT_KEYWORD {
            given.extend(known.defaults().into_iter().map(String::from));
        } else {
            given.push(name.to_string());
        }
    }
    if given.is_empty() {
        return Err(Error::new(
            "--plugins needs at least one plugin name (or `default`)",
        ));
    }
    let unknown: Vec<String> = given
        .iter()
        .filter(|n| !known.has(&feature_for(n)))
        .map(|n| format!("{n} (no feature `{}`)", feature_for(n)))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<String> = known.features().map(name_for).collect();
        return Err(Error::new(format!(
            "unknown plugin{}: {}; crates/cli/Cargo.toml knows: {}",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join(", "),
            names.join(", ")
        )));
    }
    let mut plugins: Vec<Chosen> = Vec::new();
    for (name, weight) in DEFAULT_PLUGINS {
        if given.iter().any(|g| g == name) {
            plugins.push(Chosen {
                name: (*name).to_string(),
                weight: *weight,
            });
        }
    }
    for name in &given {
        if !plugins.iter().any(|p| p.name == *name) {
            plugins.push(Chosen {
                name: name.clone(),
                weight: None,
            });
        }
    }
    // A plugin that takes another's place (Coscheduling sorts the queue instead of
    // PrioritySort) says so in its crate's metadata; the replaced one leaves the set.
    let replaced: BTreeSet<String> = plugins
        .iter()
        .flat_map(|p| PluginMeta::of(&crate::workspace_root(), &p.name).replaces)
        .collect();
    plugins.retain(|p| !replaced.contains(&p.name));
    let features: BTreeSet<String> = plugins.iter().map(|p| feature_for(&p.name)).collect();
    let chosen: BTreeSet<&str> = plugins.iter().map(|p| p.name.as_str()).collect();
    let defaults: BTreeSet<&str> = known.defaults().into_iter().collect();
    Ok(Selection {
        is_default_set: chosen == defaults,
        plugins,
        features: features.into_iter().collect(),
    })
}

/// What a plugin crate's Cargo.toml says about deploying it, under
/// `[package.metadata.kubesched]`: whether it stays out of the default build (`opt-in =
/// true`) and which plugins it replaces in a profile (`replaces = ["PrioritySort"]`). Its
/// manifests to apply with it (a CustomResourceDefinition) are the `.yaml` files of its
/// `deploy/` folder. A name with no crate under plugins/ has none of these.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginMeta {
    /// The crate's folder, when it exists.
    pub folder: Option<std::path::PathBuf>,
    /// Not in the default build.
    pub opt_in: bool,
    /// Plugins it replaces.
    pub replaces: Vec<String>,
}

impl PluginMeta {
    /// The metadata of plugin `name` in the workspace at `root`.
    pub fn of(root: &std::path::Path, name: &str) -> Self {
        let folder = root
            .join("plugins")
            .join(feature_for(name).trim_start_matches(FEATURE_PREFIX));
        let Ok(text) = std::fs::read_to_string(folder.join("Cargo.toml")) else {
            return Self::default();
        };
        let mut meta = Self::parse(&text);
        meta.folder = Some(folder);
        meta
    }

    /// Reads the `[package.metadata.kubesched]` table of a Cargo.toml.
    pub fn parse(manifest: &str) -> Self {
        let mut meta = Self::default();
        let mut inside = false;
        for line in manifest.lines().map(str::trim) {
            if line.starts_with('[') {
                inside = line == "[package.metadata.kubesched]";
                continue;
            }
            let Some((key, value)) = line.split_once('=').filter(|_| inside) else {
                continue;
            };
            match key.trim() {
                "opt-in" => meta.opt_in = value.trim() == "true",
                "replaces" => {
                    meta.replaces = value
                        .trim()
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .split(',')
                        .map(|v| v.trim().trim_matches('"').to_string())
                        .filter(|v| !v.is_empty())
                        .collect();
                }
                _ => {}
            }
        }
        meta
    }

    /// The manifests to apply with the plugin: its `deploy/*.yaml`, sorted by file name.
    pub fn manifests(&self) -> Vec<std::path::PathBuf> {
        let Some(dir) = self.folder.as_ref().map(|f| f.join("deploy")) else {
            return Vec::new();
        };
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        files
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_metadata() {
        let meta = PluginMeta::parse(
            "[package]\nname = \"x\"\n\n[package.metadata.kubesched]\n# comment\nopt-in = true\nreplaces = [\"PrioritySort\", \"Other\"]\n\n[dependencies]\nopt-in = false\n",
        );
        assert!(meta.opt_in);
        assert_eq!(meta.replaces, ["PrioritySort", "Other"]);
        assert_eq!(
            PluginMeta::parse("[package]\nname = \"x\"\n"),
            PluginMeta::default()
        );
        let cosched = PluginMeta::of(&crate::workspace_root(), "Coscheduling");
        assert!(cosched.opt_in);
        assert_eq!(cosched.replaces, ["PrioritySort"]);
        assert_eq!(cosched.manifests().len(), 1);
        assert!(!PluginMeta::of(&crate::workspace_root(), "NodeName").opt_in);
    }

    const MANIFEST: &str = r#"
[package]
name = "kubesched"

[features]
# comment
default = ["inventory", "all-plugins"]
inventory = ["kubesched-framework/inventory"]
all-plugins = [
    "plugin-node-name",
    "plugin-priority-sort",
]
plugin-default-binder = ["dep:kubesched-plugin-default-binder"]
plugin-hint-node = ["dep:kubesched-plugin-hint-node"]  # example
plugin-node-name = ["dep:kubesched-plugin-node-name"]
plugin-priority-sort = ["dep:kubesched-plugin-priority-sort"]
plugin-taint-toleration = ["dep:kubesched-plugin-taint-toleration"]

[dependencies]
plugin-not-a-feature = "1"
"#;

    fn known() -> KnownPlugins {
        KnownPlugins::from_manifest(MANIFEST)
    }

    #[test]
    fn reads_feature_names() {
        assert_eq!(
            manifest_features(MANIFEST),
            [
                "default",
                "inventory",
                "all-plugins",
                "plugin-default-binder",
                "plugin-hint-node",
                "plugin-node-name",
                "plugin-priority-sort",
                "plugin-taint-toleration"
            ]
        );
    }

    #[test]
    fn kebab_rule() {
        for (name, feature) in [
            ("NodeResourcesFit", "plugin-node-resources-fit"),
            ("HintNode", "plugin-hint-node"),
            ("CSILimits", "plugin-csi-limits"),
            ("NodeVolumeLimits", "plugin-node-volume-limits"),
            ("Plugin2Go", "plugin-plugin2-go"),
        ] {
            assert_eq!(feature_for(name), feature);
        }
        assert_eq!(name_for("plugin-node-resources-fit"), "NodeResourcesFit");
    }

    #[test]
    fn orders_like_the_default_profile() {
        let s = resolve(
            "HintNode, DefaultBinder,NodeName,TaintToleration,PrioritySort",
            &known(),
        )
        .expect("known names");
        let names: Vec<(&str, Option<i32>)> = s
            .plugins
            .iter()
            .map(|p| (p.name.as_str(), p.weight))
            .collect();
        assert_eq!(
            names,
            [
                ("PrioritySort", None),
                ("NodeName", None),
                ("TaintToleration", Some(3)),
                ("DefaultBinder", None),
                ("HintNode", None)
            ]
        );
        assert_eq!(
            s.cargo_features(),
            "inventory,plugin-default-binder,plugin-hint-node,plugin-node-name,plugin-priority-sort,plugin-taint-toleration"
        );
        assert!(!s.is_default_set);
    }

    #[test]
    fn default_keyword_and_duplicates() {
        let s = resolve("default,NodeName", &known()).expect("known names");
        assert!(s.is_default_set);
        assert_eq!(s.plugins.len(), 4);
        let s = resolve("default,HintNode", &known()).expect("known names");
        assert!(!s.is_default_set);
        assert_eq!(s.plugins.last().map(|p| p.name.as_str()), Some("HintNode"));
    }

    #[test]
    fn refuses_unknown_names_with_the_known_ones() {
        let err = resolve("NodeName,VolumeBinding,Nope", &known()).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown plugins: VolumeBinding (no feature `plugin-volume-binding`), Nope (no feature `plugin-nope`); \
             crates/cli/Cargo.toml knows: DefaultBinder, HintNode, NodeName, PrioritySort, TaintToleration"
        );
        assert!(resolve(" , ", &known()).is_err());
    }
}
