//! `example-extender [--listen ADDR]`: serves the example extender (default
//! 127.0.0.1:8888) until interrupted.

use std::net::SocketAddr;

fn listen_address() -> Result<SocketAddr, String> {
    let mut args = std::env::args().skip(1);
    let mut addr = "127.0.0.1:8888".to_string();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => addr = args.next().ok_or("--listen needs an address")?,
            "-h" | "--help" => {
                return Err(
                    "usage: example-extender [--listen ADDR] (default 127.0.0.1:8888)".into(),
                );
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    addr.parse().map_err(|e| format!("--listen {addr}: {e}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let addr = match listen_address() {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("{e}");
            return std::process::ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("listening on {addr}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    tracing::info!("example extender listening on http://{addr}/ (filter, prioritize)");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match axum::serve(listener, kubesched_example_extender::router())
        .with_graceful_shutdown(shutdown)
        .await
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("serving: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
