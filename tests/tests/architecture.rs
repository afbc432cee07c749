//! ARCHITECTURE.md stays true: every crate of the workspace has its place in the code map,
//! and every crate folder the page names still exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// The folders holding a Cargo.toml under the workspace's member globs, relative to the
/// root ("crates/cache", "plugins/node-name", "xtask", ...).
fn member_folders(root: &Path) -> BTreeSet<String> {
    let mut folders = BTreeSet::new();
    for parent in ["crates", "plugins", "examples"] {
        let entries = std::fs::read_dir(root.join(parent)).expect("the member folder exists");
        for entry in entries {
            let path = entry.expect("a readable folder entry").path();
            if path.join("Cargo.toml").is_file() {
                let name = path
                    .file_name()
                    .expect("a folder name")
                    .to_string_lossy()
                    .into_owned();
                folders.insert(format!("{parent}/{name}"));
            }
        }
    }
    for single in ["tests", "xtask"] {
        assert!(root.join(single).join("Cargo.toml").is_file());
        folders.insert(single.to_string());
    }
    folders
}

/// The crate folders the page names in backticks (`crates/x`, `plugins/y`, `xtask`, ...).
fn named_folders(page: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for quoted in page.split('`').skip(1).step_by(2) {
        let quoted = quoted.trim_end_matches('/');
        let mut parts = quoted.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(top @ ("crates" | "plugins" | "examples")), Some(name), None)
                if !name.is_empty() && !name.contains('*') && !name.contains('.') =>
            {
                named.insert(format!("{top}/{name}"));
            }
            (Some(single @ ("tests" | "xtask")), None, None) => {
                named.insert(single.to_string());
            }
            _ => {}
        }
    }
    named
}

#[test]
fn every_crate_is_on_the_map_and_the_map_names_no_missing_crate() {
    let root = workspace_root();
    let page = std::fs::read_to_string(root.join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md is in the workspace root");
    let members = member_folders(&root);
    let named = named_folders(&page);

    let missing: Vec<_> = members.difference(&named).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md has no entry for these crates (name them in backticks in the code \
         map, with a paragraph or a line saying what they own): {missing:?}"
    );
    let gone: Vec<_> = named.difference(&members).collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md names crate folders that no longer exist: {gone:?}"
    );
}

#[test]
fn the_readme_points_at_the_architecture_page() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    assert!(
        readme.contains("(ARCHITECTURE.md)"),
        "README.md should link ARCHITECTURE.md"
    );
}

#[test]
fn named_folders_reads_backticked_crate_paths_only() {
    let page = "`crates/model` and `plugins/node-name/` but not `crates/*`, \
                `crates/framework/src/runtime.rs` or `examples/*/`; `xtask` and `tests`.";
    let named: Vec<_> = named_folders(page).into_iter().collect();
    assert_eq!(
        named,
        ["crates/model", "plugins/node-name", "tests", "xtask"]
    );
}
