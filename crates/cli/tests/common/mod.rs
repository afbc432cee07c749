//! What the binary's simulate tests share: a small cluster, a scratch folder of input files
//! and running the binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// A fresh folder holding `files` (name, text).
pub fn input(test: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kubesched-ci-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write");
    }
    dir
}

pub fn kubesched(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .args(args)
        .output()
        .expect("runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// One node of one CPU, a pod that fits and one that never can.
pub const CLUSTER: &str = "apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {cpu: '1', memory: 1Gi, pods: '10'}
---
apiVersion: v1
kind: Pod
metadata: {name: small, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: '8'}}}]
";
