//! The bundled examples, end to end: their table and JSON output are snapshot-tested so a
//! change in any decision or message shows up in review.

use std::path::PathBuf;
use std::sync::Arc;

use kubesched_sim::{SimCluster, SimReport, load_paths};
// Links every in-tree plugin into this test binary.
use kubesched_tests as _;

fn example_report(explain: Option<&str>) -> SimReport {
    run_example("cluster", explain)
}

fn run_example(name: &str, explain: Option<&str>) -> SimReport {
    run_example_on_cluster(name, explain).0
}

/// Runs an example; also returns the in-memory cluster as the run left it.
fn run_example_on_cluster(name: &str, explain: Option<&str>) -> (SimReport, Arc<SimCluster>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let (manifests, problems) = load_paths(&[dir]);
    let loaded = match manifests.config.clone() {
        Some((file, text)) => {
            kubesched_config::load_str(&text, &file).expect("valid example config")
        }
        None => kubesched_config::default_config(),
    };
    kubesched_tests::with_simulation(&loaded, 0, explain, async |mut sim| {
        sim.add_problems(problems);
        sim.load(manifests, name);
        sim.settle().await;
        (sim.report(), sim.cluster().clone())
    })
}

#[test]
fn example_cluster_table() {
    let report = example_report(None);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
}

#[test]
fn example_cluster_json() {
    let report = example_report(None);
    insta::assert_json_snapshot!(report, {
        ".summary.duration_seconds" => "[duration]",
        ".summary.pods_per_second" => "[rate]",
        ".summary.latency_ms_p50" => "[latency]",
        ".summary.latency_ms_p99" => "[latency]",
    });
}

#[test]
fn example_cluster_explain() {
    let report = example_report(Some("shop/report"));
    insta::assert_yaml_snapshot!(report.explanations);
}

#[test]
fn spread_and_affinity_example_table() {
    let report = run_example("spread", None);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
}

#[test]
fn volumes_example_table_and_explain() {
    let report = run_example("volumes", Some("shop/db-0"));
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
    insta::assert_yaml_snapshot!(report.explanations);
}

/// The claims and volumes after the volumes example ran: the in-memory PV controller
/// provisioned the cache replica's WaitForFirstConsumer claim in the zone of the node the
/// scheduler chose, and left the other claims as they were.
#[test]
fn volumes_example_provisions_the_cache_claim_in_its_nodes_zone() {
    let (report, cluster) = run_example_on_cluster("volumes", None);
    let node = report
        .pods
        .iter()
        .find(|p| p.namespace == "shop" && p.name == "cache-0")
        .and_then(|p| p.node.clone())
        .expect("cache-0 is scheduled");
    let claim = cluster
        .persistent_volume_claim("shop", "data-cache-0")
        .expect("the claim exists");
    let annotations = claim.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("volume.kubernetes.io/selected-node")
            .map(String::as_str),
        Some(node.as_str())
    );
    let volume = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .expect("the claim is bound");
    let pv = cluster
        .persistent_volume(&volume)
        .expect("the volume exists");
    // The example's nodes a1, a2 are in zone-a and b1, b2 in zone-b.
    let node_zone = node.get(..1).map(|z| format!("zone-{z}"));
    let pv_zone = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref()?.required.as_ref())
        .and_then(|r| {
            r.node_selector_terms
                .iter()
                .flat_map(|t| t.match_expressions.iter().flatten())
                .find(|e| e.key == ZONE)
                .and_then(|e| e.values.as_ref()?.first().cloned())
        });
    assert_eq!(pv_zone, node_zone);
    insta::assert_snapshot!(volumes_table(&cluster));
}

const ZONE: &str = "topology.kubernetes.io/zone";

/// One line per claim (phase, volume, bind-completed, selected node) and per volume
/// (phase, capacity, claim, node affinity), sorted.
fn volumes_table(cluster: &SimCluster) -> String {
    let mut out = String::new();
    let mut claims = cluster.objects().persistent_volume_claims.list();
    claims.sort_by_key(|c| (c.metadata.namespace.clone(), c.metadata.name.clone()));
    for c in claims {
        let annotations = c.metadata.annotations.clone().unwrap_or_default();
        out.push_str(&format!(
            "claim {}/{}: phase={} volume={} bind-completed={} selected-node={}\n",
            c.metadata.namespace.as_deref().unwrap_or_default(),
            c.metadata.name.as_deref().unwrap_or_default(),
            c.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("-"),
            c.spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .unwrap_or("-"),
            annotations.contains_key("pv.kubernetes.io/bind-completed"),
            annotations
                .get("volume.kubernetes.io/selected-node")
                .map_or("-", String::as_str),
        ));
    }
    let mut volumes = cluster.objects().persistent_volumes.list();
    volumes.sort_by_key(|v| v.metadata.name.clone());
    for v in volumes {
        let spec = v.spec.clone().unwrap_or_default();
        let affinity: Vec<String> = spec
            .node_affinity
            .as_ref()
            .and_then(|a| a.required.as_ref())
            .map(|r| {
                r.node_selector_terms
                    .iter()
                    .flat_map(|t| t.match_expressions.iter().flatten())
                    .map(|e| {
                        format!(
                            "{} {} {:?}",
                            e.key,
                            e.operator,
                            e.values.clone().unwrap_or_default()
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "volume {}: phase={} capacity={} class={} claim={} affinity=[{}]\n",
            v.metadata.name.as_deref().unwrap_or_default(),
            v.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("-"),
            spec.capacity
                .as_ref()
                .and_then(|c| c.get("storage"))
                .map_or("-", |q| q.0.as_str()),
            spec.storage_class_name.as_deref().unwrap_or("-"),
            spec.claim_ref
                .as_ref()
                .map(|r| format!(
                    "{}/{}",
                    r.namespace.as_deref().unwrap_or_default(),
                    r.name.as_deref().unwrap_or_default()
                ))
                .unwrap_or_else(|| "-".into()),
            affinity.join(", "),
        ));
    }
    out
}

/// The example extender (examples/extender) behind the example scenario's configuration,
/// as the README runs them in two terminals.
#[test]
fn example_extender_scenario() {
    let ext = kubesched_tests::extender::ExtenderServer::start_router(
        kubesched_example_extender::router(),
        "/",
    );
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/extender/scenario");
    let (manifests, problems) = load_paths(&[dir]);
    assert!(problems.is_empty(), "{problems:?}");
    let (file, text) = manifests
        .config
        .clone()
        .expect("the scenario has a configuration");
    assert!(text.contains("urlPrefix: http://127.0.0.1:8888/"), "{text}");
    // The extender listens on a free port here rather than 8888.
    let text = text.replace("http://127.0.0.1:8888/", &format!("{}/", ext.url()));
    let loaded = kubesched_config::load_str(&text, &file).expect("valid example config");
    let report =
        kubesched_tests::with_simulation(&loaded, 0, Some("default/batch"), async |mut sim| {
            sim.load(manifests, "extender");
            sim.settle().await;
            sim.report()
        });
    let node_of = |name: &str| {
        report
            .pods
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.node.clone())
    };
    assert_eq!(node_of("web-1").as_deref(), Some("node-cheap"));
    assert_eq!(node_of("web-2").as_deref(), Some("node-cheap"));
    assert_eq!(node_of("batch").as_deref(), Some("node-pricey"));
    let maint = report.explanations[0]
        .nodes
        .iter()
        .find(|n| n.node == "node-maint")
        .expect("node-maint");
    assert_eq!(maint.rejected_by.as_deref(), Some("Extender"));
    assert_eq!(
        maint.reasons,
        [kubesched_example_extender::MAINTENANCE_REASON]
    );
}

#[test]
fn dra_example_table() {
    let report = run_example("dra", None);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
}

/// The claims the simulated resource-claim controller made for examples/dra and what the
/// scheduler wrote into them: each scheduled pod's claim is allocated on the pod's node,
/// reserved for the pod and protected by the finalizer, no device is handed out twice, and
/// the 24Gi GPUs of gpu-c, which the class's memory selector leaves out, are never used.
#[test]
fn dra_example_allocates_devices_on_the_pods_nodes() {
    let (report, cluster) = run_example_on_cluster("dra", None);
    let mut claims = cluster.objects().resource_claims.list();
    claims.sort_by_key(|c| c.metadata.name.clone());
    let mut taken = std::collections::BTreeSet::new();
    let mut out = String::new();
    for claim in &claims {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let owner = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.name.clone())
            .unwrap_or_else(|| "-".into());
        let status = claim.status.clone().unwrap_or_default();
        let devices: Vec<String> = status
            .allocation
            .as_ref()
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone())
            .unwrap_or_default()
            .iter()
            .map(|r| format!("{}/{}", r.pool, r.device))
            .collect();
        let reserved: Vec<String> = status
            .reserved_for
            .iter()
            .flatten()
            .map(|r| r.name.clone())
            .collect();
        let pod = report
            .pods
            .iter()
            .find(|p| p.namespace == "ml" && p.name == owner);
        if let Some(node) = pod.and_then(|p| p.node.as_deref()) {
            assert_eq!(
                reserved,
                std::slice::from_ref(&owner),
                "{name} is reserved for its pod"
            );
            assert!(
                devices.iter().all(|d| d.starts_with(&format!("{node}/"))),
                "{name}: {devices:?} are on {node}"
            );
            assert_eq!(
                claim.metadata.finalizers.as_deref(),
                Some(&["resource.kubernetes.io/delete-protection".to_string()][..])
            );
            let recorded = cluster
                .pod(&format!("ml/{owner}"))
                .and_then(|p| p.status.clone()?.resource_claim_statuses)
                .unwrap_or_default();
            assert_eq!(
                recorded
                    .iter()
                    .map(|s| (s.name.as_str(), s.resource_claim_name.as_deref()))
                    .collect::<Vec<_>>(),
                [("gpus", Some(name.as_str()))],
                "the pod's status names its generated claim"
            );
        } else {
            assert!(devices.is_empty() && reserved.is_empty(), "{name}");
        }
        for d in &devices {
            assert!(taken.insert(d.clone()), "{d} is allocated twice");
            assert!(!d.starts_with("gpu-c/"), "{d} has too little memory");
        }
        out.push_str(&format!(
            "{name}: owner={owner} devices=[{}] reservedFor=[{}]\n",
            devices.join(" "),
            reserved.join(" ")
        ));
    }
    insta::assert_snapshot!(out);
}

/// examples/dra-extended-resource: extended resources backed by DRA (v1.37). The pod
/// needing two GPUs gets n1's through a claim the scheduler made for it (owned by the pod,
/// annotated, allocated on n1, reserved for it, named in its status); the next one gets
/// n2's device-plugin GPU without a claim; the last finds none.
#[test]
fn dra_extended_resource_example() {
    let (report, cluster) = run_example_on_cluster("dra-extended-resource", None);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let node_of = |name: &str| {
        report
            .pods
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.node.clone())
    };
    assert_eq!(node_of("train-1").as_deref(), Some("n1"));
    assert_eq!(node_of("train-2").as_deref(), Some("n2"));
    assert_eq!(node_of("train-3"), None);
    let claims = cluster.objects().resource_claims.list();
    assert_eq!(claims.len(), 1, "one claim, for train-1");
    let claim = &claims[0];
    let name = claim.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("train-1-extended-resources-"), "{name}");
    assert_eq!(
        claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("resource.kubernetes.io/extended-resource-claim"))
            .map(String::as_str),
        Some("true")
    );
    let status = claim.status.clone().unwrap_or_default();
    let devices: Vec<String> = status
        .allocation
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default()
        .iter()
        .map(|r| format!("{}/{}/{}", r.request, r.pool, r.device))
        .collect();
    assert_eq!(
        devices,
        [
            "container-0-request-1/n1/gpu-0",
            "container-0-request-1/n1/gpu-1"
        ]
    );
    let reserved: Vec<String> = status
        .reserved_for
        .iter()
        .flatten()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(reserved, ["train-1"]);
    let recorded = cluster
        .pod("default/train-1")
        .and_then(|p| p.status.clone()?.extended_resource_claim_status)
        .expect("train-1's status names its claim");
    assert_eq!(recorded.resource_claim_name, name);
    assert_eq!(
        recorded
            .request_mappings
            .iter()
            .map(|m| format!(
                "{}/{}/{}",
                m.container_name, m.resource_name, m.request_name
            ))
            .collect::<Vec<_>>(),
        ["c/example.com/gpu/container-0-request-1"]
    );
    insta::assert_snapshot!(report.to_table(false));
}

/// `--explain`'s remedies through the whole pipeline, on examples that reject for other
/// reasons than resources: required anti-affinity both ways (spread) and a node selector
/// (volumes; the volume plugins have no remedies, so their nodes show none).
#[test]
fn examples_explain_remedies() {
    let remedies = |example: &str, pod: &str| -> Vec<String> {
        let report = run_example(example, Some(pod));
        let e = report.explanations.last().expect("explained");
        e.nodes
            .iter()
            .filter(|n| !n.feasible)
            .map(|n| {
                let words: Vec<String> = n
                    .remedies
                    .iter()
                    .map(|r| format!("{} [{}]", r.text, r.plugin))
                    .collect();
                format!(
                    "{} rejected by {}: {}",
                    n.node,
                    n.rejected_by.as_deref().unwrap_or("?"),
                    words.join("; ")
                )
            })
            .collect()
    };
    insta::assert_yaml_snapshot!(
        "examples_explain_remedies",
        [
            ("spread web/web-6", remedies("spread", "web/web-6")),
            ("volumes shop/batch", remedies("volumes", "shop/batch")),
        ]
    );
}
