//! The extender client's wire format against golden files written with upstream's Go field
//! names, its reading of answers, interest in pods, TLS settings and the config hand-offs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use kubesched_config::{Extender as ExtenderConfig, ExtenderManagedResource, ExtenderTlsConfig};
use kubesched_framework::model::{Node, NodeInfo, PodInfo};
use kubesched_framework::{Extender, Victims};
use serde_json::{Value, json};

use super::wire::{self, Answer};
use super::*;

/// The golden files: what upstream's scheduler sends and what an extender answers.
const GOLDEN: &[(&str, &str)] = &[
    (
        "ExtenderArgs.nodeNames.json",
        include_str!("golden/ExtenderArgs.nodeNames.json"),
    ),
    (
        "ExtenderArgs.nodes.json",
        include_str!("golden/ExtenderArgs.nodes.json"),
    ),
    (
        "ExtenderFilterResult.nodeNames.json",
        include_str!("golden/ExtenderFilterResult.nodeNames.json"),
    ),
    (
        "ExtenderFilterResult.nodes.json",
        include_str!("golden/ExtenderFilterResult.nodes.json"),
    ),
    (
        "ExtenderFilterResult.error.json",
        include_str!("golden/ExtenderFilterResult.error.json"),
    ),
    (
        "HostPriorityList.json",
        include_str!("golden/HostPriorityList.json"),
    ),
    (
        "ExtenderPreemptionArgs.metaVictims.json",
        include_str!("golden/ExtenderPreemptionArgs.metaVictims.json"),
    ),
    (
        "ExtenderPreemptionArgs.victims.json",
        include_str!("golden/ExtenderPreemptionArgs.victims.json"),
    ),
    (
        "ExtenderPreemptionResult.json",
        include_str!("golden/ExtenderPreemptionResult.json"),
    ),
    (
        "ExtenderBindingArgs.json",
        include_str!("golden/ExtenderBindingArgs.json"),
    ),
    (
        "ExtenderBindingResult.json",
        include_str!("golden/ExtenderBindingResult.json"),
    ),
];

fn golden(name: &str) -> Value {
    let text = GOLDEN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| panic!("no golden file {name}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Field names of upstream's `k8s.io/kube-scheduler/extender/v1` types (types.go).
mod upstream {
    pub const EXTENDER_ARGS: &[&str] = &["Pod", "Nodes", "NodeNames"];
    pub const EXTENDER_FILTER_RESULT: &[&str] = &[
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    ];
    pub const HOST_PRIORITY: &[&str] = &["Host", "Score"];
    pub const EXTENDER_PREEMPTION_ARGS: &[&str] =
        &["Pod", "NodeNameToVictims", "NodeNameToMetaVictims"];
    pub const VICTIMS: &[&str] = &["Pods", "NumPDBViolations"];
    pub const META_VICTIMS: &[&str] = &["Pods", "NumPDBViolations"];
    pub const META_POD: &[&str] = &["UID"];
    pub const EXTENDER_PREEMPTION_RESULT: &[&str] = &["NodeNameToMetaVictims"];
    pub const EXTENDER_BINDING_ARGS: &[&str] = &["PodName", "PodNamespace", "PodUID", "Node"];
    pub const EXTENDER_BINDING_RESULT: &[&str] = &["Error"];
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn golden_files_use_upstreams_field_names() {
    for name in ["ExtenderArgs.nodeNames.json", "ExtenderArgs.nodes.json"] {
        assert_eq!(keys(&golden(name)), set(upstream::EXTENDER_ARGS), "{name}");
    }
    for name in [
        "ExtenderFilterResult.nodeNames.json",
        "ExtenderFilterResult.nodes.json",
        "ExtenderFilterResult.error.json",
    ] {
        assert_eq!(
            keys(&golden(name)),
            set(upstream::EXTENDER_FILTER_RESULT),
            "{name}"
        );
    }
    for hp in golden("HostPriorityList.json").as_array().expect("a list") {
        assert_eq!(keys(hp), set(upstream::HOST_PRIORITY));
    }
    let meta = golden("ExtenderPreemptionArgs.metaVictims.json");
    assert_eq!(keys(&meta), set(upstream::EXTENDER_PREEMPTION_ARGS));
    for v in meta["NodeNameToMetaVictims"]
        .as_object()
        .expect("map")
        .values()
    {
        assert_eq!(keys(v), set(upstream::META_VICTIMS));
        for p in v["Pods"].as_array().expect("pods") {
            assert_eq!(keys(p), set(upstream::META_POD));
        }
    }
    let whole = golden("ExtenderPreemptionArgs.victims.json");
    assert_eq!(keys(&whole), set(upstream::EXTENDER_PREEMPTION_ARGS));
    for v in whole["NodeNameToVictims"]
        .as_object()
        .expect("map")
        .values()
    {
        assert_eq!(keys(v), set(upstream::VICTIMS));
    }
    let result = golden("ExtenderPreemptionResult.json");
    assert_eq!(keys(&result), set(upstream::EXTENDER_PREEMPTION_RESULT));
    for v in result["NodeNameToMetaVictims"]
        .as_object()
        .expect("map")
        .values()
    {
        assert_eq!(keys(v), set(upstream::META_VICTIMS));
    }
    assert_eq!(
        keys(&golden("ExtenderBindingArgs.json")),
        set(upstream::EXTENDER_BINDING_ARGS)
    );
    assert_eq!(
        keys(&golden("ExtenderBindingResult.json")),
        set(upstream::EXTENDER_BINDING_RESULT)
    );
}

fn extender(node_cache_capable: bool) -> HttpExtender {
    HttpExtender::new(&ExtenderConfig {
        url_prefix: "http://127.0.0.1:1/scheduler".into(),
        filter_verb: "filter".into(),
        node_cache_capable,
        ..Default::default()
    })
    .expect("extender")
}

fn pod_info(v: Value) -> Arc<PodInfo> {
    let pod: api::Pod = serde_json::from_value(v).expect("pod");
    Arc::new(PodInfo::new(Arc::new(pod)).expect("pod info"))
}

fn node_info(v: Value) -> Arc<NodeInfo> {
    let node: api::Node = serde_json::from_value(v).expect("node");
    Arc::new(NodeInfo::new(Arc::new(
        Node::new(Arc::new(node)).expect("node"),
    )))
}

/// The objects the golden requests were written from.
fn golden_objects() -> (Arc<PodInfo>, Vec<Arc<NodeInfo>>, Arc<PodInfo>) {
    let args = golden("ExtenderArgs.nodes.json");
    let pod = pod_info(args["Pod"].clone());
    let nodes = args["Nodes"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| node_info(n.clone()))
        .collect();
    let victim = pod_info(
        golden("ExtenderPreemptionArgs.victims.json")["NodeNameToVictims"]["n1"]["Pods"][0].clone(),
    );
    (pod, nodes, victim)
}

fn body_value(body: Vec<u8>) -> Value {
    serde_json::from_slice(&body).expect("json body")
}

#[test]
fn requests_are_written_as_the_golden_files() {
    let (pod, nodes, victim) = golden_objects();
    assert_eq!(
        body_value(extender(true).args_body(&pod, &nodes).expect("body")),
        golden("ExtenderArgs.nodeNames.json")
    );
    assert_eq!(
        body_value(extender(false).args_body(&pod, &nodes).expect("body")),
        golden("ExtenderArgs.nodes.json")
    );
    let victims: BTreeMap<String, Victims> = [(
        "n1".to_string(),
        Victims {
            pods: vec![victim],
            num_pdb_violations: 1,
        },
    )]
    .into();
    assert_eq!(
        body_value(
            extender(true)
                .preemption_body(&pod, &victims)
                .expect("body")
        ),
        golden("ExtenderPreemptionArgs.metaVictims.json")
    );
    assert_eq!(
        body_value(
            extender(false)
                .preemption_body(&pod, &victims)
                .expect("body")
        ),
        golden("ExtenderPreemptionArgs.victims.json")
    );
    assert_eq!(
        body_value(binding_body(&pod, "n1").expect("body")),
        golden("ExtenderBindingArgs.json")
    );
}

fn decoded<T: Answer>(name: &str) -> T {
    let text = GOLDEN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .expect("golden");
    wire::decode_answer(text.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn answers_are_read_from_the_golden_files() {
    let by_name: wire::ExtenderFilterResult = decoded("ExtenderFilterResult.nodeNames.json");
    assert_eq!(by_name.node_names, Some(vec!["n2".to_string()]));
    assert_eq!(by_name.nodes, None);
    assert_eq!(
        by_name.failed_nodes,
        Some([("n1".to_string(), "gpu busy".to_string())].into())
    );
    assert_eq!(
        by_name.failed_and_unresolvable_nodes,
        Some([("n3".to_string(), "no gpu".to_string())].into())
    );
    assert_eq!(by_name.error, "");

    let whole: wire::ExtenderFilterResult = decoded("ExtenderFilterResult.nodes.json");
    let names: Vec<&str> = whole
        .nodes
        .as_ref()
        .map(|l| l.items.iter().map(|n| n.metadata.name.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["n2"]);
    assert_eq!(whole.failed_and_unresolvable_nodes, None);

    let failed: wire::ExtenderFilterResult = decoded("ExtenderFilterResult.error.json");
    assert_eq!(failed.error, "gpu inventory unavailable");

    let scores: wire::HostPriorityList = decoded("HostPriorityList.json");
    assert_eq!(
        scores,
        [
            wire::HostPriority {
                host: "n1".into(),
                score: 3
            },
            wire::HostPriority {
                host: "n2".into(),
                score: 10
            }
        ]
    );

    let preemption: wire::ExtenderPreemptionResult = decoded("ExtenderPreemptionResult.json");
    let n1 = preemption
        .node_name_to_meta_victims
        .as_ref()
        .and_then(|m| m.get("n1").cloned().flatten())
        .expect("n1");
    assert_eq!(
        n1.pods,
        Some(vec![wire::MetaPod {
            uid: "uid-batch-1".into()
        }])
    );

    let bound: wire::ExtenderBindingResult = decoded("ExtenderBindingResult.json");
    assert_eq!(bound.error, "quota exceeded");
}

/// Extenders written in Rust with the public types speak exactly the golden JSON.
#[test]
fn the_public_types_round_trip_the_golden_files() {
    fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(name: &str) {
        let v = golden(name);
        let typed: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(serde_json::to_value(&typed).expect("json"), v, "{name}");
    }
    round_trip::<wire::ExtenderArgs>("ExtenderArgs.nodeNames.json");
    round_trip::<wire::ExtenderArgs>("ExtenderArgs.nodes.json");
    round_trip::<wire::ExtenderFilterResult>("ExtenderFilterResult.nodeNames.json");
    round_trip::<wire::ExtenderFilterResult>("ExtenderFilterResult.error.json");
    round_trip::<wire::HostPriorityList>("HostPriorityList.json");
    round_trip::<wire::ExtenderPreemptionArgs>("ExtenderPreemptionArgs.metaVictims.json");
    round_trip::<wire::ExtenderPreemptionArgs>("ExtenderPreemptionArgs.victims.json");
    round_trip::<wire::ExtenderPreemptionResult>("ExtenderPreemptionResult.json");
    round_trip::<wire::ExtenderBindingArgs>("ExtenderBindingArgs.json");
    round_trip::<wire::ExtenderBindingResult>("ExtenderBindingResult.json");
}

#[test]
fn answers_match_field_names_as_go_does() {
    let r: wire::ExtenderFilterResult = wire::decode_answer(
        br#"{"nodenames": ["a"], "FAILEDNODES": {"b": "x"}, "failedAndUnresolvableNodes": null, "error": "", "other": 1}"#,
    )
    .expect("decoded");
    assert_eq!(r.node_names, Some(vec!["a".to_string()]));
    assert_eq!(r.failed_nodes, Some([("b".into(), "x".into())].into()));
    assert_eq!(r.failed_and_unresolvable_nodes, None);
    let r: wire::ExtenderFilterResult =
        wire::decode_answer(br#"{"nodes": {"Items": [{"Metadata": {"Name": "n9"}}]}}"#)
            .expect("decoded");
    assert_eq!(r.nodes.expect("nodes").items[0].metadata.name, "n9");
    let r: wire::HostPriorityList =
        wire::decode_answer(br#"[{"host": "n1", "score": 4}]"#).expect("decoded");
    assert_eq!(r[0].score, 4);
    let r: wire::ExtenderPreemptionResult = wire::decode_answer(
        br#"{"nodeNameToMetaVictims": {"n1": {"pods": [{"uid": "u"}], "numPDBViolations": 2}}}"#,
    )
    .expect("decoded");
    let v = r.node_name_to_meta_victims.expect("map")["n1"]
        .clone()
        .expect("victims");
    assert_eq!(
        (v.pods.expect("pods")[0].uid.as_str(), v.num_pdb_violations),
        ("u", 2)
    );
    // An exact match wins over a case-insensitive one.
    let r: wire::ExtenderBindingResult =
        wire::decode_answer(br#"{"error": "loose", "Error": "exact"}"#).expect("decoded");
    assert_eq!(r.error, "exact");
    // Go reads the first JSON value of the body and nothing after it.
    let r: wire::ExtenderBindingResult =
        wire::decode_answer(b"{\"Error\": \"\"}\n").expect("decoded");
    assert_eq!(r.error, "");
    assert!(wire::decode_answer::<wire::ExtenderBindingResult>(b"").is_err());
    assert!(wire::decode_answer::<wire::HostPriorityList>(br#"[{"Score": 1.5}]"#).is_err());
}

fn managing(resources: &[&str]) -> HttpExtender {
    HttpExtender::new(&ExtenderConfig {
        url_prefix: "http://127.0.0.1:1/".into(),
        managed_resources: resources
            .iter()
            .map(|r| ExtenderManagedResource {
                name: r.to_string(),
                ignored_by_scheduler: false,
            })
            .collect(),
        ..Default::default()
    })
    .expect("extender")
}

#[test]
fn interest_follows_managed_resources_of_containers_and_init_containers() {
    let plain = pod_info(json!({
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    }));
    let limits = pod_info(json!({
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}]}
    }));
    let init = pod_info(json!({
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {
            "initContainers": [{"name": "i", "resources": {"requests": {"example.com/gpu": "1"}}}],
            "containers": [{"name": "c"}]
        }
    }));
    let rows = [
        (
            "no managed resources: every pod",
            managing(&[]),
            &plain,
            true,
        ),
        ("cpu only", managing(&["example.com/gpu"]), &plain, false),
        (
            "limit of a container",
            managing(&["example.com/gpu"]),
            &limits,
            true,
        ),
        (
            "request of an init container",
            managing(&["example.com/gpu"]),
            &init,
            true,
        ),
        (
            "another resource",
            managing(&["example.com/fpga"]),
            &limits,
            false,
        ),
    ];
    for (name, ext, pod, want) in rows {
        assert_eq!(ext.is_interested(pod), want, "{name}");
    }
}

fn tls_error(enable_https: bool, tls: ExtenderTlsConfig) -> String {
    HttpExtender::new(&ExtenderConfig {
        url_prefix: "https://127.0.0.1:1/".into(),
        enable_https,
        tls_config: Some(tls),
        ..Default::default()
    })
    .err()
    .unwrap_or_default()
}

#[test]
fn tls_settings_are_checked_when_the_extender_is_built() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let pem = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2==\n-----END CERTIFICATE-----\n";
    let rows = [
        (
            "insecure with a CA",
            ExtenderTlsConfig {
                insecure: true,
                ca_data: b64(pem),
                ..Default::default()
            },
            "specifying a root certificates file with the insecure flag is not allowed",
        ),
        (
            "CA data that is not base64",
            ExtenderTlsConfig {
                ca_data: "%%%".into(),
                ..Default::default()
            },
            "tlsConfig.caData: not base64",
        ),
        (
            "CA data without a certificate",
            ExtenderTlsConfig {
                ca_data: b64("nothing here"),
                ..Default::default()
            },
            "tlsConfig.caData: no certificate found",
        ),
        (
            "missing CA file",
            ExtenderTlsConfig {
                ca_file: "/nonexistent/ca.crt".into(),
                ..Default::default()
            },
            "open /nonexistent/ca.crt: ",
        ),
        (
            "certificate without key",
            ExtenderTlsConfig {
                insecure: true,
                cert_data: b64(pem),
                ..Default::default()
            },
            "tlsConfig: a client certificate needs its key",
        ),
        (
            "bad server name",
            ExtenderTlsConfig {
                insecure: true,
                server_name: "not a name".into(),
                ..Default::default()
            },
            "tlsConfig.serverName: ",
        ),
    ];
    for (name, tls, want) in rows {
        let err = tls_error(false, tls);
        assert!(err.contains(want), "{name}: {err:?} lacks {want:?}");
    }
    // enableHTTPS without a CA skips verification instead of failing.
    assert_eq!(tls_error(true, ExtenderTlsConfig::default()), "");
}

#[test]
fn ignorable_extenders_are_consulted_last() {
    let cfg = |url: &str, ignorable: bool| ExtenderConfig {
        url_prefix: url.into(),
        ignorable,
        ..Default::default()
    };
    let built = build_extenders(&[
        cfg("http://a", true),
        cfg("http://b", false),
        cfg("http://c", true),
        cfg("http://d", false),
    ])
    .expect("built");
    let names: Vec<&str> = built.iter().map(|e| e.name()).collect();
    assert_eq!(names, ["http://b", "http://d", "http://a", "http://c"]);
}
