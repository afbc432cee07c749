//! DynamicResources end to end through kube-rs against the test API server: the claim of
//! a pod is allocated on the node that has the devices, written back with its allocation,
//! finalizer and reservation, and a pod waiting for a claim that does not exist yet is
//! scheduled once the claim appears.

use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, node, node_of, options, pod,
};
use serde_json::{Value, json};

fn gpu_pod(name: &str, claim: &str) -> Value {
    let mut p = pod(name, "1");
    p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
    p
}

fn claim(name: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression": "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"}}],
        }}]}},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_allocated_reserved_and_written() {
    bounded(60, "DRA through the test API server", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        server.create("nodes", node("n2", "4"));
        server.create(
            "deviceclasses",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                   "metadata": {"name": "gpu"},
                   "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}),
        );
        server.create(
            "resourceslices",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": "n1-gpus"},
                   "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                            "devices": [
                                {"name": "gpu-0", "capacity": {"memory": {"value": "80Gi"}}},
                                {"name": "gpu-1", "capacity": {"memory": {"value": "16Gi"}}},
                            ]}}),
        );
        server.apply("resourceclaims", claim("c1"));
        server.create("pods", gpu_pod("p1", "c1"));
        server.create("pods", gpu_pod("p2", "c2"));

        let runner = Runner::start(options(&server, false, "solo")).await.expect("start");
        assert!(
            server.wait_until(Duration::from_secs(20), |s| node_of(s, "p1").is_some()).await,
            "p1 is bound"
        );
        assert_eq!(node_of(&server, "p1").as_deref(), Some("n1"));
        let c1 = server.get("resourceclaims", "default", "c1").expect("c1");
        let results = &c1["status"]["allocation"]["devices"]["results"];
        assert_eq!(results, &json!([{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]));
        assert_eq!(
            c1["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
            json!(["n1"])
        );
        let p1 = server.get("pods", "default", "p1").expect("p1");
        assert_eq!(c1["status"]["reservedFor"][0]["uid"], p1["metadata"]["uid"]);
        assert_eq!(c1["status"]["reservedFor"][0]["resource"], "pods");
        assert_eq!(c1["metadata"]["finalizers"], json!(["resource.kubernetes.io/delete-protection"]));

        // p2 waits for its claim; once it exists it would need gpu-0 too, which c1 holds.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(node_of(&server, "p2"), None);
        server.apply("resourceclaims", claim("c2"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| s
                    .get("pods", "default", "p2")
                    .is_some_and(|p| p["status"]["conditions"][0]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("cannot allocate all claims"))))
                .await,
            "p2 is tried once its claim exists and finds no free device"
        );
        assert_eq!(node_of(&server, "p2"), None);

        runner.stop();
        runner.wait().await.expect("clean stop");
        assert_rbac_covers(&server);
    })
    .await;
}

/// Extended resources backed by DRA (v1.37): a pod asking for `example.com/gpu`, which
/// the DeviceClass `gpu` names, lands on the node whose driver offers GPUs although no
/// node advertises the resource; the scheduler creates the pod's claim (generated name,
/// the pod as controller, the annotation), allocates and reserves it, and names it in the
/// pod's status.extendedResourceClaimStatus.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_resources_get_a_claim_of_their_own() {
    bounded(60, "DRA-backed extended resources through the test API server", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        server.create("nodes", node("n2", "4"));
        server.create(
            "deviceclasses",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                   "metadata": {"name": "gpu"},
                   "spec": {"extendedResourceName": "example.com/gpu",
                            "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}),
        );
        server.create(
            "resourceslices",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": "n2-gpus"},
                   "spec": {"driver": "gpu.example.com", "nodeName": "n2",
                            "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
                            "devices": [{"name": "gpu-0"}]}}),
        );
        let mut p = pod("p1", "1");
        p["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("1");
        server.create("pods", p);

        let runner = Runner::start(options(&server, false, "solo")).await.expect("start");
        assert!(
            server.wait_until(Duration::from_secs(20), |s| node_of(s, "p1").is_some()).await,
            "p1 is bound"
        );
        assert_eq!(node_of(&server, "p1").as_deref(), Some("n2"));
        let claims = server.list("resourceclaims");
        assert_eq!(claims.len(), 1, "{claims:?}");
        let c = &claims[0];
        let name = c["metadata"]["name"].as_str().expect("name").to_string();
        assert!(name.starts_with("p1-extended-resources-"), "{name}");
        assert_eq!(
            c["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"],
            "true"
        );
        let p1 = server.get("pods", "default", "p1").expect("p1");
        assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], p1["metadata"]["uid"]);
        assert_eq!(c["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(
            c["status"]["allocation"]["devices"]["results"],
            json!([{"request": "container-0-request-1", "driver": "gpu.example.com", "pool": "n2", "device": "gpu-0"}])
        );
        assert_eq!(c["status"]["reservedFor"][0]["uid"], p1["metadata"]["uid"]);
        assert_eq!(
            p1["status"]["extendedResourceClaimStatus"],
            json!({"resourceClaimName": name, "requestMappings": [
                {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-1"},
            ]})
        );

        runner.stop();
        runner.wait().await.expect("clean stop");
        assert_rbac_covers(&server);
    })
    .await;
}
