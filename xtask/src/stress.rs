//! `cargo xtask stress`: the pure parts. Which test binaries a cargo build produced (from
//! its `--message-format=json` lines), what one run of a libtest binary said about each
//! test, and the tally over many runs. Running the binaries and the load is main.rs's.

use std::collections::BTreeMap;

use crate::Error;

/// A test binary cargo built: its target name and its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestBinary {
    /// The test target's name (`kube_watch` for tests/tests/kube_watch.rs).
    pub name: String,
    /// The executable.
    pub path: String,
}

/// Whether `name` matches `pattern`, where a `*` stands for any run of characters.
pub fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    if !name.ends_with(last) {
        return false;
    }
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The integration-test binaries of `package` whose target name matches one of
/// `patterns`, from the JSON lines of `cargo test --no-run --message-format=json`,
/// sorted by name.
pub fn test_binaries(
    json_lines: &str,
    package: &str,
    patterns: &[String],
) -> Result<Vec<TestBinary>, Error> {
    let mut found = BTreeMap::new();
    for line in json_lines.lines().filter(|l| l.starts_with('{')) {
        let message: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::new(format!("reading cargo's JSON output: {e}")))?;
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(path) = message["executable"].as_str() else {
            continue;
        };
        let target = &message["target"];
        let is_test = target["kind"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == "test"));
        let name = target["name"].as_str().unwrap_or_default();
        // `package_id` names the package (`path+file:///…/tests#kubesched-tests@0.1.0`).
        let of_package = message["package_id"].as_str().is_some_and(|id| {
            id.contains(&format!("#{package}@")) || id.contains(&format!("/{package}#"))
        });
        if is_test && of_package && patterns.iter().any(|p| matches(p, name)) {
            found.insert(name.to_string(), path.to_string());
        }
    }
    Ok(found
        .into_iter()
        .map(|(name, path)| TestBinary { name, path })
        .collect())
}

/// What one run said of one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `ok`.
    Passed,
    /// `FAILED`.
    Failed,
    /// `ignored`.
    Ignored,
}

/// The `test NAME ... RESULT` lines of a libtest run, in order.
pub fn outcomes(output: &str) -> Vec<(String, Outcome)> {
    output
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("test ")?;
            let (name, result) = rest.rsplit_once(" ... ")?;
            let outcome = match result.trim() {
                "ok" => Outcome::Passed,
                "FAILED" => Outcome::Failed,
                r if r.starts_with("ignored") => Outcome::Ignored,
                _ => return None,
            };
            Some((name.to_string(), outcome))
        })
        .collect()
}

/// Passes and failures per test over every run, and the runs of a binary that ended
/// without a verdict for every test (a crash, a hang cut off, a failure to start).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// `binary::test` → (passed, failed).
    pub tests: BTreeMap<String, (u32, u32)>,
    /// Binary → the runs that ended abnormally, with what happened.
    pub broken_runs: BTreeMap<String, Vec<String>>,
}

impl Tally {
    /// Adds one run of `binary`; `exit_ok` is whether it exited with success, `ended`
    /// says how it ended when it did not.
    pub fn add_run(&mut self, binary: &str, output: &str, exit_ok: bool, ended: &str) {
        let results = outcomes(output);
        let mut any_failed = false;
        for (test, outcome) in &results {
            let entry = self.tests.entry(format!("{binary}::{test}")).or_default();
            match outcome {
                Outcome::Passed => entry.0 += 1,
                Outcome::Failed => {
                    entry.1 += 1;
                    any_failed = true;
                }
                Outcome::Ignored => {}
            }
        }
        // A run that failed without naming a failing test (it crashed, hung or could not
        // start) is a failure of its own, never a silent pass.
        if !exit_ok && !any_failed {
            self.broken_runs
                .entry(binary.to_string())
                .or_default()
                .push(ended.to_string());
        }
    }

    /// How many test runs failed, broken binary runs included.
    pub fn failures(&self) -> u32 {
        let tests: u32 = self.tests.values().map(|(_, failed)| failed).sum();
        tests
            + self
                .broken_runs
                .values()
                .map(|r| r.len() as u32)
                .sum::<u32>()
    }

    /// The report: every test that failed at least once with its count, the broken
    /// runs, and a last line with the totals.
    pub fn report(&self, runs: u32, binaries: usize) -> String {
        let mut out = String::new();
        let failing: Vec<_> = self.tests.iter().filter(|(_, (_, f))| *f > 0).collect();
        if !failing.is_empty() {
            let width = failing.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            out.push_str(&format!("{:width$}  FAILED/RUNS\n", "TEST"));
            for (name, (passed, failed)) in failing {
                out.push_str(&format!("{name:width$}  {failed}/{}\n", passed + failed));
            }
        }
        for (binary, ends) in &self.broken_runs {
            for end in ends {
                out.push_str(&format!("{binary}: a run {end}\n"));
            }
        }
        let tests = self.tests.len();
        out.push_str(&format!(
            "stress: {runs} runs of {binaries} test binaries ({tests} tests): {} failed test runs\n",
            self.failures()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        for (pattern, name, expect) in [
            ("kube_*", "kube_watch", true),
            ("kube_*", "kube_", true),
            ("kube_*", "gang", false),
            ("*_report", "html_report", true),
            ("*_report", "html_reports", false),
            ("kube_*_binding", "kube_volume_binding", true),
            ("kube_*_binding", "kube_binding", false),
            ("gang", "gang", true),
            ("gang", "gangs", false),
            ("*", "anything", true),
        ] {
            assert_eq!(matches(pattern, name), expect, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn binaries_of_the_package_and_pattern_from_cargo_json() {
        let lines = [
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#kubesched-tests@0.1.0","target":{"kind":["test"],"name":"kube_watch"},"executable":"/t/kube_watch-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#kubesched-tests@0.1.0","target":{"kind":["test"],"name":"gang"},"executable":"/t/gang-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#kubesched-tests@0.1.0","target":{"kind":["lib"],"name":"kubesched_tests"},"executable":"/t/lib-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/live#kubesched-live@0.1.0","target":{"kind":["test"],"name":"kube_other"},"executable":"/t/kube_other-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#kubesched-tests@0.1.0","target":{"kind":["test"],"name":"kube_auth"},"executable":null}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "   Compiling something",
        ]
        .join("\n");
        let found =
            test_binaries(&lines, "kubesched-tests", &["kube_*".to_string()]).expect("parsed");
        assert_eq!(
            found,
            [TestBinary {
                name: "kube_watch".into(),
                path: "/t/kube_watch-1".into()
            }]
        );
    }

    #[test]
    fn libtest_lines() {
        let output = "\nrunning 3 tests\ntest a_b ... ok\ntest c::d ... FAILED\ntest e ... ignored, slow\ntest f has been running for over 60 seconds\n\ntest result: FAILED. 1 passed; 1 failed";
        assert_eq!(
            outcomes(output),
            [
                ("a_b".to_string(), Outcome::Passed),
                ("c::d".to_string(), Outcome::Failed),
                ("e".to_string(), Outcome::Ignored),
            ]
        );
    }

    #[test]
    fn the_tally_counts_failures_and_runs_that_said_nothing() {
        let mut tally = Tally::default();
        tally.add_run("kube_x", "test one ... ok\ntest two ... ok\n", true, "");
        tally.add_run(
            "kube_x",
            "test one ... ok\ntest two ... FAILED\n",
            false,
            "exited with 101",
        );
        // A crash before any verdict: counted, not a pass.
        tally.add_run(
            "kube_x",
            "running 2 tests\n",
            false,
            "was killed by signal 9",
        );
        assert_eq!(tally.tests["kube_x::one"], (2, 0));
        assert_eq!(tally.tests["kube_x::two"], (1, 1));
        assert_eq!(tally.failures(), 2);
        let report = tally.report(3, 1);
        assert!(report.contains("kube_x::two  1/2"), "{report}");
        assert!(
            report.contains("kube_x: a run was killed by signal 9"),
            "{report}"
        );
        assert!(
            report.ends_with("stress: 3 runs of 1 test binaries (2 tests): 2 failed test runs\n"),
            "{report}"
        );
    }
}
