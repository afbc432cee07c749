//! The Grafana dashboard of `cargo xtask deploy` (`dashboards/kubesched.json`).
//!
//! One table of rows and panels, each panel a title, a unit and its PromQL queries, turned
//! into Grafana's JSON model: a Prometheus data source chosen by a template variable, and
//! job and instance pickers filled from `process_cpu_seconds_total`, which every
//! Kubernetes component serves (kubernetes-mixin's dashboards pick instances the same way).
//! Every query names only series kubesched's /metrics serves:
//! tests/tests/kube_dashboard.rs scrapes a running scheduler and checks each one.

use serde_json::{Map, Value, json};

/// The dashboard's path below the output folder.
pub const FILE: &str = "dashboards/kubesched.json";
/// The dashboard's uid (stable, so a re-import replaces it).
pub const UID: &str = "kubesched";

/// Stands for the job and instance matchers in the queries below.
const SEL: &str = "SEL";
/// What [`SEL`] becomes.
const MATCHERS: &str = r#"job=~"$job", instance=~"$instance""#;

/// One panel: a time series of its queries.
struct Panel {
    title: &'static str,
    description: &'static str,
    /// Grafana's unit id (`s`, `ops`, `bytes`, `short`, ...).
    unit: &'static str,
    /// `(PromQL, legend)` pairs; `SEL` stands for the job and instance matchers.
    queries: &'static [(&'static str, &'static str)],
}

/// A titled row of panels.
struct Row {
    title: &'static str,
    panels: &'static [Panel],
}

#[rustfmt::skip]
const ROWS: &[Row] = &[
    Row { title: "Scheduling", panels: &[
        Panel {
            title: "Scheduling attempts by result",
            description: "Attempts per second, by result (scheduled, unschedulable, error) and profile.",
            unit: "ops",
            queries: &[("sum by (result, profile) (rate(scheduler_schedule_attempts_total{SEL}[$__rate_interval]))", "{{result}} ({{profile}})")],
        },
        Panel {
            title: "Scheduling attempt latency",
            description: "One attempt: the scheduling algorithm and the start of binding.",
            unit: "s",
            queries: &[
                ("histogram_quantile(0.5, sum by (le) (rate(scheduler_scheduling_attempt_duration_seconds_bucket{SEL}[$__rate_interval])))", "p50"),
                ("histogram_quantile(0.9, sum by (le) (rate(scheduler_scheduling_attempt_duration_seconds_bucket{SEL}[$__rate_interval])))", "p90"),
                ("histogram_quantile(0.99, sum by (le) (rate(scheduler_scheduling_attempt_duration_seconds_bucket{SEL}[$__rate_interval])))", "p99"),
            ],
        },
        Panel {
            title: "Pod scheduling latency, end to end",
            description: "From the pod's first entry into the queue to its scheduling, over every attempt (the scheduling SLI).",
            unit: "s",
            queries: &[
                ("histogram_quantile(0.5, sum by (le) (rate(scheduler_pod_scheduling_sli_duration_seconds_bucket{SEL}[$__rate_interval])))", "p50"),
                ("histogram_quantile(0.9, sum by (le) (rate(scheduler_pod_scheduling_sli_duration_seconds_bucket{SEL}[$__rate_interval])))", "p90"),
                ("histogram_quantile(0.99, sum by (le) (rate(scheduler_pod_scheduling_sli_duration_seconds_bucket{SEL}[$__rate_interval])))", "p99"),
            ],
        },
        Panel {
            title: "Scheduling algorithm latency and attempts per pod",
            description: "The algorithm alone (Filter and Score), and how many attempts a scheduled pod took on average.",
            unit: "s",
            queries: &[
                ("histogram_quantile(0.99, sum by (le) (rate(scheduler_scheduling_algorithm_duration_seconds_bucket{SEL}[$__rate_interval])))", "algorithm p99"),
                ("sum(rate(scheduler_pod_scheduling_attempts_sum{SEL}[$__rate_interval])) / sum(rate(scheduler_pod_scheduling_attempts_count{SEL}[$__rate_interval]))", "attempts per scheduled pod"),
            ],
        },
    ]},
    Row { title: "Queue", panels: &[
        Panel {
            title: "Pending pods by queue",
            description: "Pods waiting in the active, backoff and unschedulable queues, and gated pods.",
            unit: "short",
            queries: &[("sum by (queue) (scheduler_pending_pods{SEL})", "{{queue}}")],
        },
        Panel {
            title: "Unschedulable pods by plugin",
            description: "Pods that a plugin rejected, by that plugin (a pod counts once per rejecting plugin).",
            unit: "short",
            queries: &[("sum by (plugin, profile) (scheduler_unschedulable_pods{SEL})", "{{plugin}} ({{profile}})")],
        },
        Panel {
            title: "Pods entering the queues",
            description: "Pods added to a queue per second, by queue and the event that moved them.",
            unit: "ops",
            queries: &[("sum by (queue, event) (rate(scheduler_queue_incoming_pods_total{SEL}[$__rate_interval]))", "{{queue}}: {{event}}")],
        },
        Panel {
            title: "Bindings in flight and cache",
            description: "Binding tasks running, and the nodes, pods and assumed pods in the scheduler's cache.",
            unit: "short",
            queries: &[
                ("sum(scheduler_goroutines{SEL, operation=\"binding\"})", "bindings in flight"),
                ("sum by (type) (scheduler_cache_size{SEL})", "cache: {{type}}"),
            ],
        },
    ]},
    Row { title: "Framework", panels: &[
        Panel {
            title: "Extension point duration (p99)",
            description: "All plugins of an extension point together, by extension point.",
            unit: "s",
            queries: &[("histogram_quantile(0.99, sum by (extension_point, le) (rate(scheduler_framework_extension_point_duration_seconds_bucket{SEL}[$__rate_interval])))", "{{extension_point}}")],
        },
        Panel {
            title: "Plugin execution duration (p99)",
            description: "One plugin at one extension point. Sampled in 10 % of the scheduling cycles, as upstream.",
            unit: "s",
            queries: &[("histogram_quantile(0.99, sum by (plugin, extension_point, le) (rate(scheduler_plugin_execution_duration_seconds_bucket{SEL}[$__rate_interval])))", "{{plugin}} {{extension_point}}")],
        },
        Panel {
            title: "Plugin evaluations",
            description: "Plugin runs per second at PreFilter, Filter, PreScore and Score.",
            unit: "ops",
            queries: &[("sum by (plugin, extension_point) (rate(scheduler_plugin_evaluation_total{SEL}[$__rate_interval]))", "{{plugin}} {{extension_point}}")],
        },
    ]},
    Row { title: "Preemption", panels: &[
        Panel {
            title: "Preemption attempts",
            description: "PostFilter preemption attempts per second.",
            unit: "ops",
            queries: &[("sum(rate(scheduler_preemption_attempts_total{SEL}[$__rate_interval]))", "attempts")],
        },
        Panel {
            title: "Preemption victims",
            description: "Pods chosen as victims per preemption: the average and the 99th percentile.",
            unit: "short",
            queries: &[
                ("sum(rate(scheduler_preemption_victims_sum{SEL}[$__rate_interval])) / sum(rate(scheduler_preemption_victims_count{SEL}[$__rate_interval]))", "average"),
                ("histogram_quantile(0.99, sum by (le) (rate(scheduler_preemption_victims_bucket{SEL}[$__rate_interval])))", "p99"),
            ],
        },
    ]},
    Row { title: "API client", panels: &[
        Panel {
            title: "API requests by code and method",
            description: "Requests to the API server per second (client-go's rest_client_requests_total).",
            unit: "ops",
            queries: &[("sum by (code, method) (rate(rest_client_requests_total{SEL}[$__rate_interval]))", "{{code}} {{method}}")],
        },
        Panel {
            title: "API request latency (p99)",
            description: "Request latency by verb, as the client measures it.",
            unit: "s",
            queries: &[("histogram_quantile(0.99, sum by (verb, le) (rate(rest_client_request_duration_seconds_bucket{SEL}[$__rate_interval])))", "{{verb}}")],
        },
        Panel {
            title: "Client rate limiter wait (p99)",
            description: "Time requests waited for the client's QPS and burst (clientConnection.qps, .burst).",
            unit: "s",
            queries: &[("histogram_quantile(0.99, sum by (verb, le) (rate(rest_client_rate_limiter_duration_seconds_bucket{SEL}[$__rate_interval])))", "{{verb}}")],
        },
    ]},
    Row { title: "Leader election and process", panels: &[
        Panel {
            title: "Leader",
            description: "1 on the replica that holds the lease, 0 on the others (served with leader election on).",
            unit: "short",
            queries: &[("max by (instance, name) (leader_election_master_status{SEL})", "{{instance}} {{name}}")],
        },
        Panel {
            title: "CPU",
            description: "CPU seconds per second (cores in use), per instance.",
            unit: "short",
            queries: &[("rate(process_cpu_seconds_total{SEL}[$__rate_interval])", "{{instance}}")],
        },
        Panel {
            title: "Memory (resident)",
            description: "Resident set size per instance.",
            unit: "bytes",
            queries: &[("process_resident_memory_bytes{SEL}", "{{instance}}")],
        },
        Panel {
            title: "Open file descriptors",
            description: "Open descriptors and the limit, per instance.",
            unit: "short",
            queries: &[
                ("process_open_fds{SEL}", "{{instance}} open"),
                ("process_max_fds{SEL}", "{{instance}} limit"),
            ],
        },
    ]},
];

/// The data source every panel and variable queries: the dashboard's variable.
fn datasource() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

/// A query variable filled from `label_values(...)`.
fn label_variable(name: &str, label: &str, query: &str) -> Value {
    json!({
        "allValue": ".+",
        "current": {},
        "datasource": datasource(),
        "definition": query,
        "hide": 0,
        "includeAll": true,
        "label": label,
        "multi": true,
        "name": name,
        "options": [],
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "type": "query",
    })
}

/// The job variable's query.
pub const JOB_QUERY: &str = "label_values(process_cpu_seconds_total, job)";
/// The instance variable's query.
pub const INSTANCE_QUERY: &str =
    r#"label_values(process_cpu_seconds_total{job=~"$job"}, instance)"#;

fn panel(p: &Panel, id: u64, x: u64, y: u64) -> Value {
    let targets: Vec<Value> = p
        .queries
        .iter()
        .zip('A'..)
        .map(|((expr, legend), ref_id)| {
            json!({
                "datasource": datasource(),
                "expr": expr.replace(SEL, MATCHERS),
                "legendFormat": legend,
                "range": true,
                "refId": ref_id.to_string(),
            })
        })
        .collect();
    json!({
        "datasource": datasource(),
        "description": p.description,
        "fieldConfig": {
            "defaults": {
                "custom": {"drawStyle": "line", "fillOpacity": 10, "lineWidth": 1, "showPoints": "never"},
                "unit": p.unit,
            },
            "overrides": [],
        },
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "id": id,
        "options": {
            "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": true},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets,
        "title": p.title,
        "type": "timeseries",
    })
}

/// The dashboard as Grafana's JSON model, keys sorted (the same bytes whatever serde_json's
/// features), ending in a newline.
pub fn render() -> String {
    let mut panels = Vec::new();
    let mut id = 1;
    let mut y = 0;
    for row in ROWS {
        panels.push(json!({
            "collapsed": false,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            "id": id,
            "panels": [],
            "title": row.title,
            "type": "row",
        }));
        id += 1;
        y += 1;
        for (i, p) in row.panels.iter().enumerate() {
            let x = if i % 2 == 0 { 0 } else { 12 };
            panels.push(panel(p, id, x, y));
            id += 1;
            if i % 2 == 1 || i + 1 == row.panels.len() {
                y += 8;
            }
        }
    }
    let dashboard = json!({
        "annotations": {"list": []},
        "description": "kubesched's scheduling, queue, framework, preemption, API client, leader election and process metrics. Rendered by `cargo xtask deploy` (xtask/src/dashboard.rs).",
        "editable": true,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "links": [],
        "panels": panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["kubesched", "kubernetes", "scheduler"],
        "templating": {"list": [
            {
                "current": {},
                "hide": 0,
                "includeAll": false,
                "label": "Data source",
                "multi": false,
                "name": "datasource",
                "options": [],
                "query": "prometheus",
                "refresh": 1,
                "regex": "",
                "type": "datasource",
            },
            label_variable("job", "Job", JOB_QUERY),
            label_variable("instance", "Instance", INSTANCE_QUERY),
        ]},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "kubesched",
        "uid": UID,
        "version": 1,
    });
    let mut text = serde_json::to_string_pretty(&sorted(dashboard))
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

/// `value` with every object's keys inserted in sorted order: sorted output whether or not
/// a crate in the build turned on serde_json's `preserve_order`.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k, sorted(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_has_the_pickers_matchers() {
        let d: Value = serde_json::from_str(&render()).expect("valid JSON");
        let panels = d["panels"].as_array().expect("panels");
        let mut queries = 0;
        for p in panels.iter().filter(|p| p["type"] == "timeseries") {
            for t in p["targets"].as_array().expect("targets") {
                let expr = t["expr"].as_str().expect("expr");
                assert!(!expr.contains(SEL), "{expr}");
                assert!(expr.contains(MATCHERS), "{expr}");
                queries += 1;
            }
        }
        assert!(queries >= 20, "{queries} queries");
        let ids: std::collections::BTreeSet<u64> =
            panels.iter().filter_map(|p| p["id"].as_u64()).collect();
        assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    }
}
