//! VolumeBinding end to end through kube-rs against the test API server, the test playing
//! the external provisioner and the PV controller: a WaitForFirstConsumer claim gets
//! `volume.kubernetes.io/selected-node`, the pod binds once PreBind sees the claim bound; a
//! local static volume gets its claimRef from PreBind; and when nobody provisions within
//! `bindTimeoutSeconds`, the binding cycle fails with upstream's error and the pod is
//! tried again.

use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, events_of, node, node_of, options, pod, requests_to,
};
use serde_json::{Value, json};

const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const ZONE: &str = "topology.kubernetes.io/zone";

/// Two nodes, n1 in zone a and n2 in zone b; a class provisioning in zone b only; a local
/// class without provisioner.
fn cluster(server: &TestApiServer) {
    for (name, zone) in [("n1", "a"), ("n2", "b")] {
        let mut n = node(name, "4");
        n["metadata"]["labels"][ZONE] = json!(zone);
        server.create("nodes", n);
    }
    server.create(
        "storageclasses",
        json!({
            "metadata": {"name": "zonal"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["b"]}]}],
        }),
    );
    server.create(
        "storageclasses",
        json!({
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }),
    );
}

fn claim(name: &str, class: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
        "status": {"phase": "Pending"},
    })
}

fn pod_with_claim(name: &str, claim: &str) -> Value {
    let mut p = pod(name, "100m");
    p["spec"]["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
    p
}

fn annotation(server: &TestApiServer, claim: &str, key: &str) -> Option<String> {
    server
        .get("persistentvolumeclaims", "default", claim)
        .and_then(|c| {
            c["metadata"]["annotations"][key]
                .as_str()
                .map(str::to_string)
        })
}

/// What the PV controller does once a volume is bound to the claim: the claim gets the
/// volume's name and the bind-completed annotation.
fn complete_binding(server: &TestApiServer, claim: &str, volume: &str) {
    server.modify("persistentvolumeclaims", "default", claim, |c| {
        c["spec"]["volumeName"] = json!(volume);
        c["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = json!("yes");
        c["status"]["phase"] = json!("Bound");
    });
}

/// What the external provisioner does for a claim with a selected node: a volume in the
/// node's zone, bound to the claim.
fn provision(server: &TestApiServer, claim: &str) -> String {
    let pvc = server
        .get("persistentvolumeclaims", "default", claim)
        .expect("claim");
    let uid = pvc["metadata"]["uid"].as_str().unwrap_or("").to_string();
    let name = format!("pvc-{uid}");
    server.create(
        "persistentvolumes",
        json!({
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "zonal",
                "csi": {"driver": "csi.example.com", "volumeHandle": name},
                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default", "name": claim, "uid": uid},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}]}},
            },
            "status": {"phase": "Bound"},
        }),
    );
    complete_binding(server, claim, &name);
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_first_consumer_claim_is_provisioned_for_the_chosen_node() {
    bounded(60, "provisioning through the test API server", async {
        let server = TestApiServer::start().await;
        cluster(&server);
        server.create("persistentvolumeclaims", claim("data-web-0", "zonal"));
        server.create("pods", pod_with_claim("web-0", "data-web-0"));
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");

        // PreBind writes the node the class can provision on, then waits.
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| annotation(
                    s,
                    "data-web-0",
                    SELECTED_NODE
                )
                .is_some())
                .await,
            "the claim gets a selected node"
        );
        assert_eq!(
            annotation(&server, "data-web-0", SELECTED_NODE).as_deref(),
            Some("n2")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            node_of(&server, "web-0"),
            None,
            "the pod waits for its volume"
        );
        assert_eq!(
            requests_to(&server, "PUT", "/persistentvolumeclaims/data-web-0").len(),
            1
        );

        // NominatedNodeNameForExpectation (on from v1.35): PreBind has work, so the
        // binding cycle told the API where the pod is going before starting it.
        let nominated = |s: &TestApiServer| {
            s.get("pods", "default", "web-0").and_then(|p| {
                p["status"]["nominatedNodeName"]
                    .as_str()
                    .map(str::to_string)
            })
        };
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| nominated(s).is_some())
                .await
        );
        assert_eq!(nominated(&server).as_deref(), Some("n2"));

        provision(&server, "data-web-0");
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "web-0").is_some())
                .await,
            "the pod binds once its claim is bound"
        );
        assert_eq!(node_of(&server, "web-0").as_deref(), Some("n2"));
        // The API server clears the nomination when it binds the pod (v1.35+).
        assert_eq!(nominated(&server), None);
        assert!(events_of(&server, "FailedScheduling", "web-0").is_empty());
        assert_rbac_covers(&server);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_local_volume_gets_its_claim_ref_from_pre_bind() {
    bounded(60, "static binding through the test API server", async {
        let server = TestApiServer::start().await;
        cluster(&server);
        server.create(
            "persistentvolumes",
            json!({
                "metadata": {"name": "local-n1"},
                "spec": {
                    "capacity": {"storage": "5Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "local",
                    "local": {"path": "/mnt/disk"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}},
                },
                "status": {"phase": "Available"},
            }),
        );
        server.create("persistentvolumeclaims", claim("db", "local"));
        server.create("pods", pod_with_claim("db-0", "db"));
        let runner = Runner::start(options(&server, false, "solo")).await.expect("start");

        let claim_ref = |s: &TestApiServer| {
            s.get("persistentvolumes", "", "local-n1")
                .map(|pv| pv["spec"]["claimRef"].clone())
                .filter(|r| !r.is_null())
        };
        assert!(
            server.wait_until(Duration::from_secs(20), |s| claim_ref(s).is_some()).await,
            "PreBind writes the volume's claimRef"
        );
        let r = claim_ref(&server).expect("claimRef");
        let uid = server.get("persistentvolumeclaims", "default", "db").expect("claim")["metadata"]["uid"].clone();
        assert_eq!((&r["name"], &r["namespace"], &r["uid"]), (&json!("db"), &json!("default"), &uid));
        let pv = server.get("persistentvolumes", "", "local-n1").expect("pv");
        assert_eq!(pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"], "yes");

        complete_binding(&server, "db", "local-n1");
        assert!(server.wait_until(Duration::from_secs(20), |s| node_of(s, "db-0").is_some()).await);
        assert_eq!(node_of(&server, "db-0").as_deref(), Some("n1"));
        assert_rbac_covers(&server);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_times_out_with_upstreams_error_and_the_pod_is_retried() {
    bounded(60, "a volume binding timeout", async {
        let server = TestApiServer::start().await;
        cluster(&server);
        server.create("persistentvolumeclaims", claim("slow", "zonal"));
        server.create("pods", pod_with_claim("waits", "slow"));
        let mut o = options(&server, false, "solo");
        o.config = kubesched_config::load_str(
            "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
clientConnection: {qps: 500, burst: 500}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: VolumeBinding
    args: {bindTimeoutSeconds: 1}
",
            "config.yaml",
        )
        .expect("valid configuration");
        let runner = Runner::start(o).await.expect("start");

        // The event and the condition are written by different clients: wait for both.
        let condition_reason = |s: &TestApiServer| {
            s.get("pods", "default", "waits")
                .map(|p| p["status"]["conditions"][0]["reason"].clone())
        };
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| !events_of(
                    s,
                    "FailedScheduling",
                    "waits"
                )
                .is_empty()
                    && condition_reason(s).is_some_and(|r| !r.is_null()))
                .await,
            "the binding cycle fails"
        );
        let event = &events_of(&server, "FailedScheduling", "waits")[0];
        assert_eq!(
            event["note"],
            r#"running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded"#
        );
        let condition =
            server.get("pods", "default", "waits").expect("pod")["status"]["conditions"][0].clone();
        assert_eq!(condition["reason"], "SchedulerError");
        assert_eq!(node_of(&server, "waits"), None);

        // The pod is tried again: the selected node is written again and, once the volume is
        // provisioned, the pod binds.
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| requests_to(
                    s,
                    "PUT",
                    "/persistentvolumeclaims/slow"
                )
                .len()
                    >= 2)
                .await,
            "the pod is retried"
        );
        provision(&server, "slow");
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "waits").is_some())
                .await
        );
        assert_eq!(node_of(&server, "waits").as_deref(), Some("n2"));
        assert_rbac_covers(&server);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}
