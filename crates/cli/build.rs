//! Records the git commit the binary is built from as `KUBESCHED_GIT_COMMIT`: taken from
//! that variable when the build environment sets it (an image build from a tarball or a
//! `cargo vendor` tree), else asked of git; without either the binary says "unknown".

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

fn main() {
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
