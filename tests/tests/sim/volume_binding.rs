//! VolumeBinding on the in-memory cluster, whose PV controller binds and provisions: a
//! StatefulSet-style set of pods whose claims use WaitForFirstConsumer classes (provisioned
//! with the chosen node's topology, or bound to local static volumes), a claim without a
//! class that gets the default Immediate class, and the upstream messages of pods that
//! cannot be placed.

use std::sync::Arc;

use kubesched_sim::{PodState, SimCluster, SimReport};
// Links every in-tree plugin into this test binary.
use kubesched_tests as _;

const ZONE: &str = "topology.kubernetes.io/zone";

/// Three nodes (n1, n2 in zone a; n3 in zone b) with the CSI driver on each, reporting its
/// zone topology key; a provisioning WaitForFirstConsumer class, a local static class and a
/// default Immediate class.
const CLUSTER: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1, topology.kubernetes.io/zone: a}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '20'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2, topology.kubernetes.io/zone: a}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '20'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n3, labels: {kubernetes.io/hostname: n3, topology.kubernetes.io/zone: b}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '20'}}}
- {apiVersion: storage.k8s.io/v1, kind: CSINode, metadata: {name: n1}, spec: {drivers: [{name: csi.example.com, nodeID: n1, topologyKeys: [topology.kubernetes.io/zone]}]}}
- {apiVersion: storage.k8s.io/v1, kind: CSINode, metadata: {name: n2}, spec: {drivers: [{name: csi.example.com, nodeID: n2, topologyKeys: [topology.kubernetes.io/zone]}]}}
- {apiVersion: storage.k8s.io/v1, kind: CSINode, metadata: {name: n3}, spec: {drivers: [{name: csi.example.com, nodeID: n3, topologyKeys: [topology.kubernetes.io/zone]}]}}
- {apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: fast}, provisioner: csi.example.com, volumeBindingMode: WaitForFirstConsumer}
- {apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: local}, provisioner: kubernetes.io/no-provisioner, volumeBindingMode: WaitForFirstConsumer}
- {apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: standard, annotations: {storageclass.kubernetes.io/is-default-class: 'true'}}, provisioner: csi.example.com}
";

fn claim(name: &str, class: Option<&str>, size: &str) -> String {
    let class = class
        .map(|c| format!(", storageClassName: {c}"))
        .unwrap_or_default();
    format!(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}}}\nspec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: {size}}}}}{class}}}\n"
    )
}

fn local_volume(name: &str, node: &str, size: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec:\n  capacity: {{storage: {size}}}\n  accessModes: [ReadWriteOnce]\n  storageClassName: local\n  local: {{path: /mnt/disk}}\n  nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{node}]}}]}}]}}}}\n"
    )
}

fn pod(name: &str, claims: &[&str]) -> String {
    let volumes: Vec<String> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| format!("  - {{name: v{i}, persistentVolumeClaim: {{claimName: {c}}}}}\n"))
        .collect();
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}}}\nspec:\n  containers:\n  - {{name: c, image: app, resources: {{requests: {{cpu: 100m}}}}}}\n  volumes:\n{}",
        volumes.concat()
    )
}

fn simulate(manifests: &str) -> (SimReport, Arc<SimCluster>) {
    let loaded = kubesched_config::default_config();
    kubesched_tests::with_simulation(&loaded, 1, None, async |mut sim| {
        let m = kubesched_tests::manifests_of(manifests);
        sim.load(m, "input.yaml");
        sim.settle().await;
        (sim.report(), sim.cluster().clone())
    })
}

fn node_of<'a>(report: &'a SimReport, pod: &str) -> Option<&'a str> {
    report
        .pods
        .iter()
        .find(|p| p.name == pod)
        .and_then(|p| p.node.as_deref())
}

fn message_of(report: &SimReport, pod: &str) -> String {
    report
        .pods
        .iter()
        .find(|p| p.name == pod)
        .and_then(|p| p.message.clone())
        .unwrap_or_default()
}

/// The claim's volume, when it is fully bound.
fn volume_of(cluster: &SimCluster, claim: &str) -> Option<String> {
    let pvc = cluster.persistent_volume_claim("default", claim)?;
    let bound = pvc
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("pv.kubernetes.io/bind-completed"));
    let name = pvc.spec.as_ref()?.volume_name.clone()?;
    let phase = pvc.status.as_ref()?.phase.as_deref()?;
    (bound && phase == "Bound").then_some(name)
}

/// The zone a volume's node affinity requires.
fn zone_of(cluster: &SimCluster, pv: &str) -> Option<String> {
    let pv = cluster.persistent_volume(pv)?;
    let terms = &pv
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .find(|e| e.key == ZONE)
        .and_then(|e| e.values.as_ref()?.first().cloned())
}

#[test]
fn stateful_set_claims_are_provisioned_on_the_chosen_nodes_zone() {
    let mut input = String::from(CLUSTER);
    for i in 0..3 {
        input.push_str(&claim(&format!("data-web-{i}"), Some("fast"), "1Gi"));
        input.push_str(&pod(&format!("web-{i}"), &[&format!("data-web-{i}")]));
    }
    let (report, cluster) = simulate(&input);
    assert_eq!(report.summary.scheduled, 3, "{report:#?}");
    for i in 0..3 {
        let node = node_of(&report, &format!("web-{i}")).expect("scheduled");
        let pv = volume_of(&cluster, &format!("data-web-{i}")).expect("claim bound");
        assert_eq!(
            pv,
            format!("pvc-uid-data-web-{i}"),
            "named as upstream provisioners do"
        );
        let want = if node == "n3" { "b" } else { "a" };
        assert_eq!(
            zone_of(&cluster, &pv).as_deref(),
            Some(want),
            "web-{i} on {node}"
        );
        let volume = cluster.persistent_volume(&pv).expect("pv");
        let spec = volume.spec.as_ref().expect("spec");
        assert_eq!(
            spec.capacity.as_ref().expect("capacity")["storage"].0,
            "1Gi"
        );
        assert_eq!(
            spec.csi.as_ref().map(|c| c.driver.as_str()),
            Some("csi.example.com")
        );
        assert_eq!(
            volume.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Bound")
        );
    }
}

#[test]
fn local_static_volumes_are_bound_where_they_are() {
    let input = format!(
        "{CLUSTER}{}{}{}{}{}{}{}",
        local_volume("local-n3", "n3", "10Gi"),
        local_volume("local-n1-small", "n1", "1Gi"),
        claim("db-0", Some("local"), "5Gi"),
        pod("db-0", &["db-0"]),
        claim("db-1", Some("local"), "5Gi"),
        pod("db-1", &["db-1"]),
        // A claim for a local volume and one provisioned: both on the node of the first.
        claim("cache", Some("fast"), "1Gi"),
    );
    let input = format!("{input}{}", pod("later", &["cache"]));
    let (report, cluster) = simulate(&input);
    // One claim gets the only large enough volume; the other finds none anywhere.
    let (placed, left) = if node_of(&report, "db-0").is_some() {
        ("db-0", "db-1")
    } else {
        ("db-1", "db-0")
    };
    assert_eq!(node_of(&report, placed), Some("n3"));
    assert_eq!(volume_of(&cluster, placed).as_deref(), Some("local-n3"));
    let pv = cluster.persistent_volume("local-n3").expect("pv");
    let claim_ref = pv
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .expect("claimRef");
    assert_eq!(claim_ref.name.as_deref(), Some(placed));
    assert_eq!(
        claim_ref.uid.as_deref(),
        Some(format!("uid-{placed}").as_str())
    );
    let failed = report.pods.iter().find(|p| p.name == left).expect("pod");
    assert_eq!(failed.status, PodState::Unschedulable);
    let msg = message_of(&report, left);
    assert!(
        msg.starts_with("0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."),
        "{msg}"
    );
    assert_eq!(volume_of(&cluster, left), None);
    assert!(node_of(&report, "later").is_some());
}

#[test]
fn claims_without_a_class_get_the_default_and_are_provisioned_at_once() {
    let input = format!(
        "{CLUSTER}{}{}",
        claim("plain", None, "2Gi"),
        pod("uses-plain", &["plain"])
    );
    let (report, cluster) = simulate(&input);
    assert!(node_of(&report, "uses-plain").is_some(), "{report:#?}");
    let pvc = cluster
        .persistent_volume_claim("default", "plain")
        .expect("claim");
    assert_eq!(
        pvc.spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref()),
        Some("standard")
    );
    let pv = volume_of(&cluster, "plain").expect("bound");
    // Immediate provisioning knows no node: no topology.
    assert_eq!(zone_of(&cluster, &pv), None);
}

#[test]
fn upstream_messages_for_claims_that_cannot_be_used() {
    let input = format!(
        "{CLUSTER}{}{}{}{}",
        pod("no-claim", &["missing"]),
        claim("stuck", Some("slow"), "1Gi"),
        pod("immediate", &["stuck"]),
        "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: slow}\nprovisioner: kubernetes.io/no-provisioner\n",
    );
    let (report, _) = simulate(&input);
    let msg = message_of(&report, "no-claim");
    assert!(
        msg.starts_with(r#"0/3 nodes are available: persistentvolumeclaim "missing" not found."#),
        "{msg}"
    );
    let msg = message_of(&report, "immediate");
    assert!(
        msg.starts_with(
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        ),
        "{msg}"
    );
}

#[test]
fn generic_ephemeral_volumes_get_their_claims_and_volumes() {
    let input = format!(
        "{CLUSTER}---
apiVersion: v1
kind: Pod
metadata: {{name: scratchy, namespace: default, uid: uid-scratchy}}
spec:
  containers:
  - {{name: c, image: app}}
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        metadata: {{labels: {{type: scratch}}}}
        spec: {{accessModes: [ReadWriteOnce], storageClassName: fast, resources: {{requests: {{storage: 3Gi}}}}}}
"
    );
    let (report, cluster) = simulate(&input);
    assert!(node_of(&report, "scratchy").is_some(), "{report:#?}");
    let pvc = cluster
        .persistent_volume_claim("default", "scratchy-scratch")
        .expect("the ephemeral volume controller made the claim");
    let owner = &pvc.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        ("Pod", "scratchy", "uid-scratchy", Some(true))
    );
    assert_eq!(
        pvc.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("type"))
            .map(String::as_str),
        Some("scratch")
    );
    let pv = volume_of(&cluster, "scratchy-scratch").expect("bound");
    assert_eq!(
        cluster
            .persistent_volume(&pv)
            .expect("pv")
            .spec
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .map(|c| c["storage"].0.clone()),
        Some("3Gi".to_string())
    );
}

#[test]
fn provisioning_takes_capacity_off_the_pools() {
    // Zone a's pool holds two 2Gi volumes, zone b's one; a fourth claim fits nowhere.
    let mut input = format!(
        "{CLUSTER}---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {{name: csi.example.com}}
spec: {{storageCapacity: true}}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {{name: pool-a, namespace: kube-system}}
storageClassName: fast
capacity: 5Gi
nodeTopology: {{matchLabels: {{topology.kubernetes.io/zone: a}}}}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {{name: pool-b, namespace: kube-system}}
storageClassName: fast
capacity: 3Gi
nodeTopology: {{matchLabels: {{topology.kubernetes.io/zone: b}}}}
"
    );
    for i in 0..4 {
        input.push_str(&claim(&format!("data-{i}"), Some("fast"), "2Gi"));
        input.push_str(&pod(&format!("p{i}"), &[&format!("data-{i}")]));
    }
    let (report, _) = simulate(&input);
    assert_eq!(report.summary.scheduled, 3, "{report:#?}");
    let left = report
        .pods
        .iter()
        .find(|p| p.node.is_none())
        .expect("one pod left");
    let msg = left.message.clone().unwrap_or_default();
    assert!(
        msg.starts_with("0/3 nodes are available: 3 node(s) did not have enough free storage."),
        "{msg}"
    );
}

#[test]
fn the_pv_controller_binds_immediate_and_pre_bound_claims() {
    let manual = |name: &str, size: &str| {
        format!(
            "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec: {{capacity: {{storage: {size}}}, accessModes: [ReadWriteOnce], storageClassName: manual, hostPath: {{path: /data}}}}\n"
        )
    };
    let mut input = format!(
        "{CLUSTER}---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: manual}}\nprovisioner: kubernetes.io/no-provisioner\n{}{}{}{}{}",
        manual("m-10", "10Gi"),
        manual("m-5", "5Gi"),
        manual("named-pv", "2Gi"),
        claim("want-3", Some("manual"), "3Gi"),
        claim("too-big", Some("manual"), "20Gi"),
    );
    input.push_str(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: named, namespace: default, uid: uid-named}\nspec: {accessModes: [ReadWriteOnce], storageClassName: manual, volumeName: named-pv, resources: {requests: {storage: 1Gi}}}\n",
    );
    input.push_str(&pod("uses-3", &["want-3"]));
    input.push_str(&pod("uses-named", &["named"]));
    input.push_str(&pod("uses-too-big", &["too-big"]));
    let (report, cluster) = simulate(&input);
    // The smallest volume that fits, and the one named by the claim.
    assert_eq!(volume_of(&cluster, "want-3").as_deref(), Some("m-5"));
    assert_eq!(volume_of(&cluster, "named").as_deref(), Some("named-pv"));
    assert!(node_of(&report, "uses-3").is_some() && node_of(&report, "uses-named").is_some());
    // Nothing fits the large claim: it stays unbound, and so does its pod.
    assert_eq!(volume_of(&cluster, "too-big"), None);
    let msg = message_of(&report, "uses-too-big");
    assert!(
        msg.starts_with(
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        ),
        "{msg}"
    );
    // The free volume was made Available; the bound ones say Bound.
    let phase = |pv: &str| {
        cluster
            .persistent_volume(pv)
            .and_then(|p| p.status.as_ref()?.phase.clone())
    };
    assert_eq!(phase("m-10").as_deref(), Some("Available"));
    assert_eq!(phase("m-5").as_deref(), Some("Bound"));

    // Writes to a stale version are refused as the API server refuses them.
    let mut stale = (*cluster.persistent_volume("m-10").expect("pv")).clone();
    stale.metadata.resource_version = Some("999".into());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let err = runtime
        .block_on(
            kubesched_framework::ClusterClient::update_persistent_volume(cluster.as_ref(), &stale),
        )
        .expect_err("stale");
    assert_eq!(
        err,
        kubesched_framework::ClientError::Conflict(
            r#"Operation cannot be fulfilled on persistentvolumes "m-10": the object has been modified; please apply your changes to the latest version and try again"#.into()
        )
    );
}
