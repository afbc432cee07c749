//! The Grafana dashboard (deploy/dashboards/kubesched.json) fills in: a scheduler with leader
//! election runs against the test API server, schedules pods (so the histograms have
//! samples, and a sampled cycle has recorded plugin durations) and fails one, and every
//! metric a panel's query or a variable's query names has samples in its /metrics.

use std::collections::BTreeSet;
use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, events_of, http_get, lease_holder, node, node_of, options, pod,
};
use serde_json::Value;

/// The families the dashboard must chart (issue 32's list).
const CHARTED: &[&str] = &[
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds_bucket",
    "scheduler_pending_pods",
    "scheduler_framework_extension_point_duration_seconds_bucket",
    "scheduler_plugin_execution_duration_seconds_bucket",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims_bucket",
    "scheduler_queue_incoming_pods_total",
    "scheduler_unschedulable_pods",
    "rest_client_requests_total",
    "rest_client_request_duration_seconds_bucket",
    "leader_election_master_status",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_open_fds",
];

/// Words of PromQL that are not metric names: aggregations, their modifiers, operators.
const KEYWORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "group",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
];

/// The metric names a PromQL expression refers to: identifiers outside strings, label
/// matchers (`{...}`) and ranges (`[...]`) that are neither a function called (followed
/// by `(`), a keyword, nor a label of a `by (...)`-like list.
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    let mut skip_group = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            }
            '{' | '[' => {
                let close = if c == '{' { '}' } else { ']' };
                while i < chars.len() && chars[i] != close {
                    i += 1;
                }
                i += 1;
            }
            '(' if skip_group => {
                while i < chars.len() && chars[i] != ')' {
                    i += 1;
                }
                i += 1;
                skip_group = false;
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = chars[i..].iter().find(|c| !c.is_whitespace());
                if [
                    "by",
                    "without",
                    "on",
                    "ignoring",
                    "group_left",
                    "group_right",
                ]
                .contains(&word.as_str())
                {
                    skip_group = true;
                } else if next != Some(&'(') && !KEYWORDS.contains(&word.as_str()) {
                    names.push(word);
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                // A number (0.99, 1e3) is not a name, its exponent letter included.
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    names
}

#[test]
fn metric_names_are_read_from_promql() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (verb, le) (rate(rest_client_request_duration_seconds_bucket{job=~"$job", instance=~"$instance"}[$__rate_interval])))"#
        ),
        ["rest_client_request_duration_seconds_bucket"]
    );
    assert_eq!(
        metric_names(
            r#"sum(rate(a_sum{x="by (y)"}[5m])) / sum without (le) (rate(b_count[1m])) > bool 1e3"#
        ),
        ["a_sum", "b_count"]
    );
    assert_eq!(metric_names("process_open_fds"), ["process_open_fds"]);
}

/// The names of the series a /metrics text has samples of.
fn sampled(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// Every query of the dashboard: (where, PromQL). A variable's `label_values(METRIC, label)`
/// contributes its metric selector.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().expect("a target's expr").to_string();
            out.push((format!("panel {:?}", p["title"]), expr));
        }
    }
    for v in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"].as_str().expect("a variable's query");
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.rsplit_once(','))
            .map(|(selector, _)| selector.to_string())
            .unwrap_or_else(|| panic!("variable {:?}: not label_values(...): {q}", v["name"]));
        out.push((format!("variable {:?}", v["name"]), inner));
    }
    out
}

fn dashboard() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/dashboards/kubesched.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

#[test]
fn the_dashboard_charts_the_families_operators_look_for() {
    let d = dashboard();
    let named: BTreeSet<String> = queries(&d)
        .into_iter()
        .flat_map(|(_, q)| metric_names(&q))
        .collect();
    for family in CHARTED {
        assert!(
            named.contains(*family),
            "no panel charts {family}: {named:?}"
        );
    }
    // The pickers come from the process collector, as kubernetes-mixin's do.
    let variables: Vec<&str> = d["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(variables, ["datasource", "job", "instance"]);
}

/// Pods created per round while waiting for a sampled cycle (one in ten, as upstream).
const ROUND: usize = 10;
/// Rounds at most: 20 rounds without a sampled cycle would be 200 unsampled cycles.
const ROUNDS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_series_the_dashboard_queries_is_served() {
    bounded(120, "the dashboard's series from a running scheduler", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "8"));
        server.create("nodes", node("n2", "8"));
        // Fits no node: a FailedScheduling, an unschedulable pod by plugin, a preemption try.
        server.create("pods", pod("huge", "64"));

        let runner = Runner::start(options(&server, true, "solo")).await.expect("start");
        let addr = runner.http_addr().expect("http endpoints");
        assert!(
            server.wait_until(Duration::from_secs(30), |s| lease_holder(s) == "solo").await,
            "the scheduler leads"
        );
        assert!(
            server
                .wait_until(Duration::from_secs(30), |s| !events_of(s, "FailedScheduling", "huge").is_empty())
                .await,
            "huge is unschedulable"
        );

        // Plugin durations are recorded in a sampled share of the cycles: schedule rounds of
        // pods until one was, each round waiting for its pods' bindings.
        let mut created = 0;
        let plugin_samples = "scheduler_plugin_execution_duration_seconds_bucket{";
        for _ in 0..ROUNDS {
            let names: Vec<String> = (created..created + ROUND).map(|i| format!("p-{i}")).collect();
            created += ROUND;
            for n in &names {
                server.create("pods", pod(n, "10m"));
            }
            assert!(
                server
                    .wait_until(Duration::from_secs(30), |s| names.iter().all(|n| node_of(s, n).is_some()))
                    .await,
                "the round's pods are bound"
            );
            // The attempt is counted once the bind has returned, just after the API saw it.
            let counted = format!(
                "scheduler_schedule_attempts_total{{result=\"scheduled\",profile=\"default-scheduler\"}} {created}"
            );
            assert!(
                server
                    .wait_until(Duration::from_secs(10), |_| runner.scheduler().metrics().encode().contains(&counted))
                    .await,
                "{counted}"
            );
            if runner.scheduler().metrics().encode().contains(plugin_samples) {
                break;
            }
        }

        let (code, scrape) = http_get(addr, "/metrics").await;
        assert_eq!(code, 200);
        let served = sampled(&scrape);
        let mut missing = Vec::new();
        for (place, query) in queries(&dashboard()) {
            for name in metric_names(&query) {
                if !served.contains(&name) {
                    missing.push(format!("{place}: {name}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "series the dashboard queries that /metrics does not serve:\n{}\n\n{scrape}",
            missing.join("\n")
        );
        assert!(scrape.contains("leader_election_master_status{name=\"kube-scheduler\"} 1"), "{scrape}");

        runner.stop();
        runner.wait().await.expect("clean stop");
        assert_rbac_covers(&server);
    })
    .await;
}
