//! kubesched as a drop-in for kube-scheduler: the argument lists of real kube-scheduler
//! Deployments go through the binary's own parser (`kubesched::kube_flags`, what
//! `kubesched ARGS…` runs) and the scheduler they describe starts against the test API
//! server and binds a pod of its profile. The only substitution is the one a pod makes
//! for itself: the configuration file names the API server's kubeconfig
//! (`clientConnection.kubeconfig`) where a pod would use its in-cluster configuration,
//! and the endpoints are moved to a free loopback port.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use kubesched::kube_flags;
use kubesched_framework::{FeatureGates, ObjectKind};
use kubesched_live::{Runner, Serving, Tls};
use kubesched_plugin_coscheduling::PodGroup;
use kubesched_tests::apiserver::fixtures::{bounded, node, node_of, pod, test_logs};
use kubesched_tests::apiserver::{self, TestApiServer};

// The opt-in plugin the second-scheduler chart enables, linked into this test binary.
use kubesched_plugin_coscheduling as _;

/// Writes `config` (with the kubeconfig line added) where the Deployment mounts it, under
/// the server's folder, and returns the argument list with the path put in.
fn mount(server: &TestApiServer, at: &str, config: &str, args: &[&str]) -> Vec<String> {
    let path = server.dir().join(at.trim_start_matches('/'));
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
    let kubeconfig = server.write_kubeconfig();
    let text = format!(
        "{config}clientConnection:\n  kubeconfig: {}\n",
        kubeconfig.display()
    );
    std::fs::write(&path, text).expect("write the configuration");
    args.iter()
        .map(|a| a.replace(at, &path.display().to_string()))
        .collect()
}

/// Parses the argument list as the binary does and starts the scheduler it describes.
async fn start(args: &[String]) -> Runner {
    let matches = kube_flags::command()
        .try_get_matches_from(kube_flags::normalize(args.iter().cloned()))
        .unwrap_or_else(|e| panic!("{args:?} parse: {e}"));
    let mut warnings = Vec::new();
    let plan = kube_flags::plan(&matches, FeatureGates::defaults(), &mut warnings)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(plan.write_config_to.is_none());
    let mut options = plan.options;
    options.serving = Some(Serving {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        tls: Tls::Plain,
        auth: None,
    });
    options.shutdown_timeout = Duration::from_secs(5);
    Runner::start(options).await.expect("the scheduler starts")
}

fn pod_for(name: &str, scheduler: &str) -> serde_json::Value {
    let mut p = pod(name, "500m");
    p["spec"]["schedulerName"] = scheduler.into();
    p
}

/// The "Configure Multiple Schedulers" tutorial's Deployment, with the `--v` and
/// `--leader-elect` flags such Deployments add.
const TUTORIAL_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: my-scheduler
leaderElection:
  leaderElect: false
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tutorial_deployments_args_start_kubesched_and_it_schedules() {
    test_logs();
    bounded(60, "the tutorial Deployment's args", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        let args = mount(
            &server,
            "/data/app/config/scheduler.yaml",
            TUTORIAL_CONFIG,
            &[
                "--config=/data/app/config/scheduler.yaml",
                "--v=3",
                "--leader-elect=false",
            ],
        );
        let runner = start(&args).await;
        assert!(!runner.scheduler().metrics().encode().is_empty());
        server.create("pods", pod_for("web", "my-scheduler"));
        server.create("pods", pod_for("other", "default-scheduler"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "web").is_some())
                .await,
            "my-scheduler's pod is bound"
        );
        assert_eq!(node_of(&server, "web").as_deref(), Some("n1"));
        assert_eq!(node_of(&server, "other"), None, "not this scheduler's pod");
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

/// scheduler-plugins' "as a second scheduler" chart
/// (manifests/install/charts/as-a-second-scheduler, scheduler-plugins at 903da7df):
/// the Deployment's args and its ConfigMap's scheduler-config.yaml, rendered with the
/// release namespace `scheduler-plugins` and `plugins.enabled` kept to the one of the
/// chart's defaults kubesched has (Coscheduling); `disabled`, `pluginConfig` and the
/// leader election block as the chart's values give them.
const SECOND_SCHEDULER_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
  resourceNamespace: scheduler-plugins
  resourceName: scheduler-plugins-scheduler
profiles:
# Compose all plugins in one profile
- schedulerName: scheduler-plugins-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      disabled:
      - name: PrioritySort
  pluginConfig:
  - args:
      permitWaitingTimeSeconds: 10
    name: Coscheduling
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_plugins_second_scheduler_args_start_kubesched_and_it_schedules() {
    test_logs();
    bounded(60, "the second-scheduler chart's args", async {
        apiserver::serve_kind(ObjectKind::of::<PodGroup>());
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        let args = mount(
            &server,
            "/etc/kubernetes/scheduler-config.yaml",
            SECOND_SCHEDULER_CONFIG,
            &["--config=/etc/kubernetes/scheduler-config.yaml"],
        );
        assert!(Path::new(args[0].trim_start_matches("--config=")).exists());
        let runner = start(&args).await;
        server.create("pods", pod_for("batch", "scheduler-plugins-scheduler"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "batch").is_some())
                .await,
            "the second scheduler's pod is bound"
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[test]
fn the_deployments_flags_are_all_in_the_table_and_accepted() {
    for name in ["config", "v", "leader-elect"] {
        let f = kube_flags::find(name).expect("in the table");
        assert!(f.accepted(), "{name}");
    }
}

/// kube-scheduler v1.36+ serves `/statusz` and `/flagz` (ComponentStatusz, ComponentFlagz:
/// beta and on); the flags a Deployment passes show there with the defaults of the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statusz_and_flagz_show_the_component_and_its_command_line() {
    use kubesched_tests::apiserver::fixtures::{http_get, http_get_accept};
    test_logs();
    bounded(60, "the z-pages", async {
        let server = TestApiServer::start().await;
        let args = mount(
            &server,
            "/etc/kubernetes/scheduler.yaml",
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\n",
            &["--config=/etc/kubernetes/scheduler.yaml", "--v=3"],
        );
        let runner = start(&args).await;
        let addr = runner.http_addr().expect("http endpoints");

        let (code, text) = http_get(addr, "/statusz").await;
        assert_eq!(code, 200, "{text}");
        assert!(
            text.starts_with("\nkube-scheduler statusz\nWarning: This endpoint is not meant to be machine parseable"),
            "{text}"
        );
        let (code, json) = http_get_accept(
            addr,
            "/statusz",
            "application/json;v=v1beta1;g=config.k8s.io;as=Statusz",
        )
        .await;
        assert_eq!(code, 200, "{json}");
        let statusz: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(statusz["kind"], "Statusz");
        assert_eq!(statusz["apiVersion"], "config.k8s.io/v1beta1");
        assert_eq!(statusz["metadata"]["name"], "kube-scheduler");
        assert_eq!(statusz["emulationVersion"], "1.37");
        assert_eq!(
            statusz["paths"],
            serde_json::json!(["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"])
        );
        let (code, _) = http_get_accept(addr, "/statusz", "application/json").await;
        assert_eq!(code, 406, "structured without g, v and as is not acceptable");

        let (code, json) = http_get_accept(
            addr,
            "/flagz",
            "application/json;v=v1beta1;g=config.k8s.io;as=Flagz",
        )
        .await;
        assert_eq!(code, 200, "{json}");
        let flagz: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(flagz["kind"], "Flagz");
        assert_eq!(flagz["flags"]["v"], "3", "given");
        assert_eq!(
            flagz["flags"]["leader-elect-resource-name"],
            "kube-scheduler",
            "a default"
        );
        assert!(flagz["flags"]["config"].as_str().is_some_and(|c| c.ends_with("scheduler.yaml")));
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}
