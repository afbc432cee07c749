//! Records the plugin features the `kubesched` binary offers (the `plugin-*` features of
//! crates/cli/Cargo.toml), so a configuration naming an upstream plugin that no feature
//! adds is told the plugin is not implemented instead of being sent to a feature that does
//! not exist.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let manifest = dir.join("../cli/Cargo.toml");
    println!("cargo::rerun-if-changed={}", manifest.display());
    // Outside the workspace (no binary manifest beside us) no feature is known.
    let text = std::fs::read_to_string(&manifest).unwrap_or_default();
    let features: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("plugin-"))
        .filter_map(|l| l.split('=').next())
        .map(|f| format!("{:?}", f.trim()))
        .collect();
    let out =
        PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("plugin_features.rs");
    let code = format!(
        "/// The `plugin-*` Cargo features of the kubesched binary.\npub const PLUGIN_FEATURES: &[&str] = &[{}];\n",
        features.join(", ")
    );
    if let Err(e) = std::fs::write(&out, code) {
        println!("cargo::error=writing {}: {e}", out.display());
    }
}
