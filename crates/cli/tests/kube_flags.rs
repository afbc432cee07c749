//! kube-scheduler v1.37's command line through the binary: every flag of the table
//! (`kubesched::kube_flags::FLAGS`) is either accepted with its meaning (the binary runs
//! with it and `--write-config-to` shows what it made of it, before any connection) or
//! refused with its reason; plus upstream's mapping rules, the pflag forms, the log
//! output on a pipe, version, completion and man.

use std::path::PathBuf;
use std::process::Command;

use kubesched::kube_flags::{self, FLAGS, Kind, Verdict};

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn kubesched(args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .args(args)
        .env_remove("KUBESCHED_LOG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("runs");
    Out {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kubesched-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    dir.join(name)
}

/// A value each accepted flag takes, files written where it needs one.
fn sample(name: &str) -> String {
    match name {
        "config" => {
            let p = tmp("config.yaml");
            std::fs::write(
                &p,
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
            )
            .expect("write");
            p.display().to_string()
        }
        "master" => "https://127.0.0.1:6443".into(),
        "bind-address" => "127.0.0.1".into(),
        "secure-port" => "10300".into(),
        "tls-min-version" => "VersionTLS12".into(),
        "authentication-token-webhook-cache-ttl"
        | "authorization-webhook-cache-authorized-ttl"
        | "authorization-webhook-cache-unauthorized-ttl" => "30s".into(),
        "authorization-always-allow-paths" => "/healthz,/metrics".into(),
        "kube-api-burst" => "200".into(),
        "kube-api-qps" => "75".into(),
        "kube-api-content-type" => "application/json".into(),
        "pod-max-in-unschedulable-pods-duration" => "5m".into(),
        "leader-elect-lease-duration" => "20s".into(),
        "leader-elect-renew-deadline" => "12s".into(),
        "leader-elect-retry-period" => "3s".into(),
        "leader-elect-resource-lock" => "leases".into(),
        "log-flush-frequency" => "2s".into(),
        "v" => "3".into(),
        "logging-format" => "json".into(),
        "emulated-version" => "kube=1.36".into(),
        "min-compatibility-version" => "kube=1.36".into(),
        "feature-gates" => "kube:OpportunisticBatching=true".into(),
        "tls-cert-file"
        | "tls-private-key-file"
        | "client-ca-file"
        | "kubeconfig"
        | "authentication-kubeconfig"
        | "authorization-kubeconfig" => tmp("some-file").display().to_string(),
        _ => "x".into(),
    }
}

/// What the written configuration must say after the flag (a YAML fragment), if anything.
fn expect_in_config(name: &str) -> Option<&'static str> {
    Some(match name {
        "kube-api-burst" => "burst: 200",
        "kube-api-qps" => "qps: 75",
        "kube-api-content-type" => "contentType: application/json",
        "profiling" => "enableProfiling: true",
        "contention-profiling" => "enableContentionProfiling: true",
        "leader-elect" => "leaderElect: true",
        "leader-elect-lease-duration" => "leaseDuration: 20s",
        "leader-elect-renew-deadline" => "renewDeadline: 12s",
        "leader-elect-retry-period" => "retryPeriod: 3s",
        "leader-elect-resource-name" => "resourceName: x",
        "leader-elect-resource-namespace" => "resourceNamespace: x",
        _ => return None,
    })
}

#[test]
fn every_upstream_flag_is_accepted_or_refused_with_its_reason() {
    assert!(FLAGS.len() >= 60, "the table holds kube-scheduler's flags");
    let out_file = tmp("written.yaml");
    let write_to = format!("--write-config-to={}", out_file.display());
    let mut checked = 0;
    for f in FLAGS {
        if matches!(f.name, "help" | "version" | "write-config-to") {
            continue;
        }
        let arg = match f.kind {
            Kind::Bool => format!("--{}", f.name),
            Kind::Value => format!("--{}={}", f.name, sample(f.name)),
        };
        // Flags that need a partner get it.
        let mut args = vec![arg.clone(), write_to.clone()];
        if f.name == "tls-cert-file" {
            args.push(format!(
                "--tls-private-key-file={}",
                sample("tls-private-key-file")
            ));
        }
        if f.name == "tls-private-key-file" {
            args.push(format!("--tls-cert-file={}", sample("tls-cert-file")));
        }
        if f.name == "leader-elect-lease-duration" {
            args.push("--leader-elect-renew-deadline=12s".into());
        }
        let _ = std::fs::remove_file(&out_file);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = kubesched(&refs);
        match f.verdict {
            Verdict::Accepted(_) | Verdict::Deprecated(_) => {
                assert!(out.ok, "{arg} is accepted, but: {}", out.stderr);
                let written = std::fs::read_to_string(&out_file).unwrap_or_else(|e| {
                    panic!("{arg}: no configuration written ({e}): {}", out.stderr)
                });
                if let Some(want) = expect_in_config(f.name) {
                    assert!(
                        written.contains(want),
                        "{arg}: the configuration lacks {want:?}:\n{written}"
                    );
                }
                if matches!(f.verdict, Verdict::Deprecated(_)) {
                    assert!(
                        out.stderr.contains("deprecated"),
                        "{arg} warns: {}",
                        out.stderr
                    );
                }
            }
            Verdict::Refused(reason) | Verdict::Removed(reason) => {
                assert!(!out.ok, "{arg} is refused");
                assert!(
                    out.stderr.contains(&format!("--{}", f.name)) && out.stderr.contains(reason),
                    "{arg} is refused with its reason, got: {}",
                    out.stderr
                );
                assert!(!out_file.exists(), "{arg}: nothing written");
            }
        }
        checked += 1;
    }
    assert!(checked >= 60);
}

#[test]
fn flags_take_both_value_forms_and_booleans_as_pflag_does() {
    for (args, want) in [
        (
            vec!["--leader-elect-resource-name", "sched-a"],
            "resourceName: sched-a",
        ),
        (
            vec!["--leader-elect-resource-name=sched-b"],
            "resourceName: sched-b",
        ),
        (vec!["--leader-elect=false"], "leaderElect: false"),
        (vec!["--leader-elect", "false"], "leaderElect: false"),
        (vec!["--leader-elect=f"], "leaderElect: false"),
        (vec!["--leader-elect"], "leaderElect: true"),
        (vec!["--profiling=false"], "enableProfiling: false"),
    ] {
        let out_file = tmp("forms.yaml");
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.push(format!("--write-config-to={}", out_file.display()));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = kubesched(&refs);
        assert!(out.ok, "{args:?}: {}", out.stderr);
        let written = std::fs::read_to_string(&out_file).expect("written");
        assert!(written.contains(want), "{args:?} gives {want}:\n{written}");
    }
    let out = kubesched(&["--leader-elect=maybe", "--write-config-to=/dev/null"]);
    assert!(
        !out.ok && out.stderr.contains("--leader-elect=maybe"),
        "{}",
        out.stderr
    );
}

#[test]
fn run_takes_the_same_flags_and_the_top_level_means_run() {
    let a = tmp("run-a.yaml");
    let b = tmp("run-b.yaml");
    let out = kubesched(&[
        "run",
        "--kube-api-qps=9",
        &format!("--write-config-to={}", a.display()),
    ]);
    assert!(out.ok, "{}", out.stderr);
    let out = kubesched(&[
        "--kube-api-qps=9",
        &format!("--write-config-to={}", b.display()),
    ]);
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(a).expect("a"),
        std::fs::read_to_string(b).expect("b")
    );
    let out = kubesched(&["--kube-api-qps=9", "simulate", "x"]);
    assert!(
        !out.ok && out.stderr.contains("after `run`"),
        "{}",
        out.stderr
    );
}

#[test]
fn deprecated_flags_are_ignored_with_config_as_upstream_says_and_leader_flags_override() {
    let config = tmp("with-config.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         clientConnection:\n  qps: 33\nleaderElection:\n  resourceName: from-file\n",
    )
    .expect("write");
    let out_file = tmp("with-config-out.yaml");
    let out = kubesched(&[
        &format!("--config={}", config.display()),
        "--kube-api-qps=77",
        "--leader-elect-resource-name=from-flag",
        &format!("--write-config-to={}", out_file.display()),
    ]);
    assert!(out.ok, "{}", out.stderr);
    let written = std::fs::read_to_string(&out_file).expect("written");
    assert!(
        written.contains("qps: 33"),
        "the file's qps stays:\n{written}"
    );
    assert!(written.contains("resourceName: from-flag"), "{written}");
    assert!(
        out.stderr
            .contains("--kube-api-qps is deprecated and ignored because --config is given"),
        "{}",
        out.stderr
    );
    // Validation runs after the flags, as upstream's.
    let out = kubesched(&[
        "--leader-elect-resource-lock=endpoints",
        "--write-config-to=/dev/null",
    ]);
    assert!(
        !out.ok && out.stderr.contains("resourceLock"),
        "{}",
        out.stderr
    );
}

#[test]
fn normalize_reads_klog_verbosity_forms() {
    for form in [
        &["--v=3"][..],
        &["--v", "3"],
        &["-v=3"],
        &["-v3"],
        &["-v", "3"],
    ] {
        let mut args = vec!["kubesched".to_string()];
        args.extend(form.iter().map(|s| s.to_string()));
        assert_eq!(
            kube_flags::normalize(args),
            vec!["kubesched".to_string(), "--v=3".to_string()],
            "{form:?}"
        );
    }
    assert_eq!(
        kube_flags::normalize(["kubesched", "-vv", "simulate", "-v"]),
        vec!["kubesched", "-vv", "simulate", "-v"]
    );
}

fn has_escape(text: &str) -> bool {
    text.contains('\x1b')
}

#[test]
fn logs_on_a_pipe_have_no_escape_codes_and_json_ends_with_a_json_error() {
    // Text: a log line from the configuration loading, then the error.
    let out = kubesched(&["--config=/nonexistent/sched.yaml", "--v=2"]);
    assert!(!out.ok);
    assert!(!has_escape(&out.stderr), "{:?}", out.stderr);
    assert!(
        out.stderr
            .trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("error: ")),
        "{}",
        out.stderr
    );
    // JSON: every line is a JSON object, the last one the error.
    let config = format!("--config={}", sample("config"));
    for fmt in ["--logging-format=json", "--log-format=json"] {
        // A warning (the ignored deprecated flag), then the error of the validation that
        // follows the flags.
        let out = kubesched(&[
            fmt,
            &config,
            "--kube-api-qps=3",
            "--leader-elect-resource-lock=endpoints",
        ]);
        assert!(!out.ok);
        assert!(!has_escape(&out.stderr), "{:?}", out.stderr);
        let lines: Vec<serde_json::Value> = out
            .stderr
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
            .collect();
        let last = lines.last().expect("a line");
        assert_eq!(last["msg"], "command failed", "{last}");
        assert!(
            last["err"]
                .as_str()
                .is_some_and(|e| e.contains("resourceLock")),
            "{last}"
        );
        assert!(last["ts"].is_f64(), "{last}");
        assert!(
            lines
                .iter()
                .any(|l| l["msg"].as_str().is_some_and(|m| m.contains("deprecated")))
        );
    }
    // A command line clap refuses, in JSON too.
    let out = kubesched(&["--logging-format=json", "--no-such-flag"]);
    assert!(!out.ok);
    let last: serde_json::Value =
        serde_json::from_str(out.stderr.trim_end().lines().last().expect("line")).expect("json");
    assert!(
        last["err"]
            .as_str()
            .is_some_and(|e| e.contains("--no-such-flag")),
        "{last}"
    );
}

#[test]
fn version_reports_commit_release_and_plugins() {
    let out = kubesched(&["version"]);
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stdout.contains("kube-scheduler reproduced: v1.37"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("git commit: "), "{}", out.stdout);
    assert!(out.stdout.contains("NodeResourcesFit"), "{}", out.stdout);
    assert_eq!(kubesched(&["--version"]).stdout, out.stdout);
    let json: serde_json::Value =
        serde_json::from_str(&kubesched(&["version", "-o", "json"]).stdout).expect("json");
    assert_eq!(json["kubernetesVersion"], "v1.37");
    assert!(json["plugins"].as_array().is_some_and(|p| !p.is_empty()));
    let raw: serde_json::Value =
        serde_json::from_str(&kubesched(&["--version=raw"]).stdout).expect("json");
    assert_eq!(raw, json);
    let out = kubesched(&["--version=v1.99.0"]);
    assert!(
        !out.ok && out.stderr.contains("reports its own version"),
        "{}",
        out.stderr
    );
}

#[test]
fn completion_and_man_are_generated() {
    let out = kubesched(&["completion", "bash"]);
    assert!(out.ok && out.stdout.contains("kubesched"), "{}", out.stderr);
    let script = tmp("kubesched.bash");
    std::fs::write(&script, &out.stdout).expect("write");
    let check = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .expect("bash");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        out.stdout.contains("--leader-elect"),
        "kube-scheduler's flags complete too"
    );
    for shell in ["zsh", "fish"] {
        let out = kubesched(&["completion", shell]);
        assert!(out.ok && !out.stdout.is_empty(), "{shell}: {}", out.stderr);
    }
    let out = kubesched(&["man"]);
    assert!(
        out.ok && out.stdout.contains(".TH kubesched"),
        "{}",
        out.stdout
    );
    let dir = tmp("man");
    let out = kubesched(&["man", "--dir", &dir.display().to_string()]);
    assert!(out.ok, "{}", out.stderr);
    assert!(dir.join("kubesched.1").exists() && dir.join("kubesched-run.1").exists());
}
