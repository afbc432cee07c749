//! The test API server as a process of its own, for `kubesched bench --kubeconfig` by hand:
//!
//! ```sh
//! cargo run --release -p kubesched-tests --example test_apiserver &   # prints the kubeconfig path
//! kubesched bench --kubeconfig /tmp/kubesched-apiserver-.../kubeconfig --filter SchedulingBasic/5000Nodes
//! ```
//!
//! It serves on a free port of 127.0.0.1 until it is stopped (Ctrl-C or SIGTERM), on a
//! runtime of its own, so its CPU time is apart from the benchmark's process.

use kubesched_tests::apiserver::TestApiServer;

#[allow(clippy::print_stdout)]
#[tokio::main]
async fn main() {
    let server = TestApiServer::start().await;
    let kubeconfig = server.write_kubeconfig();
    println!("{}", kubeconfig.display());
    kubesched_live::shutdown_signal().await;
    drop(server);
}
