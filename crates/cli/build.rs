//! Records the git commit the binary is built from as `KUBESCHED_GIT_COMMIT`: taken from
//! that variable when the build environment sets it (an image build from a tarball or a
//! `cargo vendor` tree), else asked of git; without either the binary says "unknown".
//!
//! Writes the plugin wiring `src/plugins.rs` includes, from this crate's own Cargo.toml:
//! for every `plugin-<folder> = ["dep:<crate>"]` feature, a `use <crate> as _;` line behind
//! it (what links the crate, and so its registration, in), and the list of those features
//! for the registry (`registry::offered_features`), so a configuration naming a plugin this
//! build lacks is sent to a feature that exists.

// Build scripts talk to cargo on standard output.
#![allow(clippy::print_stdout)]

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The `plugin-*` features of a Cargo manifest's `[features]` table, each with the optional
/// dependency it turns on (None when its value names no `dep:`).
fn plugin_features(manifest: &str) -> Vec<(String, Option<String>)> {
    let mut in_features = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && !line.starts_with(char::is_whitespace) {
            in_features = trimmed == "[features]";
            continue;
        }
        let Some((key, value)) = line.split_once('=').filter(|_| in_features) else {
            continue;
        };
        let key = key.trim();
        if !key.starts_with("plugin-") {
            continue;
        }
        let dep = value
            .split('"')
            .find_map(|v| v.strip_prefix("dep:"))
            .map(str::to_string);
        out.push((key.to_string(), dep));
    }
    out
}

/// The code `src/plugins.rs` includes.
fn plugin_wiring(features: &[(String, Option<String>)]) -> String {
    let mut code = String::from(
        "// Written by build.rs from crates/cli/Cargo.toml's plugin features: do not edit.\n",
    );
    let names: Vec<String> = features.iter().map(|(f, _)| format!("{f:?}")).collect();
    code.push_str(&format!(
        "kubesched_framework::register_plugin_features!({});\n",
        names.join(", ")
    ));
    for (feature, dep) in features {
        match dep {
            Some(dep) => code.push_str(&format!(
                "#[cfg(feature = {feature:?})]\nuse {} as _;\n",
                dep.replace('-', "_")
            )),
            None => code.push_str(&format!(
                "compile_error!({:?});\n",
                format!(
                    "crates/cli/Cargo.toml: the feature `{feature}` turns on no plugin crate; write `{feature} = [\"dep:kubesched-{feature}\"]`"
                )
            )),
        }
    }
    code
}

fn main() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifest = dir.join("Cargo.toml");
    println!("cargo:rerun-if-changed={}", manifest.display());
    match std::fs::read_to_string(&manifest) {
        Ok(text) => {
            let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default())
                .join("plugins.rs");
            if let Err(e) = std::fs::write(&out, plugin_wiring(&plugin_features(&text))) {
                println!("cargo::error=writing {}: {e}", out.display());
            }
        }
        Err(e) => println!("cargo::error=reading {}: {e}", manifest.display()),
    }

    println!("cargo:rerun-if-env-changed=KUBESCHED_GIT_COMMIT");
    let commit = std::env::var("KUBESCHED_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            // Rebuild when HEAD moves (a commit, a checkout); worktrees have their own HEAD.
            for path in ["HEAD", "logs/HEAD"] {
                if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(p);
                    if p.exists() {
                        println!("cargo:rerun-if-changed={}", p.display());
                    }
                }
            }
            git(&["rev-parse", "HEAD"])
        });
    if let Some(commit) = commit {
        println!("cargo:rustc-env=KUBESCHED_GIT_COMMIT={commit}");
    }
}
