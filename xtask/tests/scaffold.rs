//! `cargo xtask new-plugin`, end to end: the scaffold runs into a copy of the workspace and
//! the new crate's own tests pass there with `CI=true` (its snapshot file included). The
//! copy reuses the target folder, so only the workspace's own crates build again.

use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::scaffold::{self, NewPlugin};

/// Copies the workspace, leaving out build output and git's data.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("read the workspace") {
        let entry = entry.expect("an entry");
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().expect("a type").is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy a file");
        }
    }
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => xtask::workspace_root().join("target"),
    }
}

#[test]
fn a_new_plugin_builds_and_passes_its_own_tests() {
    let copy = std::env::temp_dir().join(format!("kubesched-scaffold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    copy_tree(&xtask::workspace_root(), &copy);

    let plugin = NewPlugin::new("ScaffoldProbe", "Filter,Score", true).expect("valid");
    let written = scaffold::create(&copy, &plugin).expect("scaffolded");
    assert!(
        written.iter().any(|p| p.ends_with("src/lib.rs")),
        "{written:?}"
    );
    // A second run refuses to overwrite the crate.
    assert!(scaffold::create(&copy, &plugin).is_err());
    // One point, no args.
    let scorer = NewPlugin::new("ScaffoldScorer", "Score", false).expect("valid");
    scaffold::create(&copy, &scorer).expect("scaffolded");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // What `cargo xtask new-plugin` does after writing: the files are rustfmt's layout.
    let fmt = Command::new(&cargo)
        .current_dir(&copy)
        .args(["fmt", "-p", &plugin.package(), "-p", &scorer.package()])
        .status()
        .expect("cargo fmt runs");
    assert!(fmt.success());
    let out = Command::new(&cargo)
        .current_dir(&copy)
        .args([
            "test",
            "--offline",
            "-p",
            &plugin.package(),
            "-p",
            &scorer.package(),
        ])
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CI", "true")
        .env_remove("INSTA_UPDATE")
        .output()
        .expect("cargo runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    assert_eq!(log.matches("two_nodes ... ok").count(), 2, "{log}");
    assert!(log.contains("score_prefers_emptier_nodes ... ok"), "{log}");
    assert!(log.contains("filter_table ... ok"), "{log}");
    assert!(!log.contains(".snap.new"), "{log}");
    let _ = std::fs::remove_dir_all(&copy);
}
