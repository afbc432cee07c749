//! The HTTP endpoints of the secure port (10259 by default): `/healthz`, `/livez`,
//! `/readyz` (ready once every watcher has listed), `/metrics` (upstream's metric names,
//! Prometheus text format or OpenMetrics when asked for) and `/configz` (the effective
//! configuration). TLS with the given certificate, or a self-signed one made at start-up;
//! plain HTTP only when asked for (local use).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum_server::tls_rustls::RustlsConfig;
use kubesched_scheduler::Scheduler;

use crate::error::RunError;
use crate::watch::SyncTracker;

/// How the endpoints are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tls {
    /// A self-signed certificate generated at start-up (upstream's default).
    SelfSigned,
    /// A certificate and key from PEM files.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key.
        key: PathBuf,
    },
    /// No TLS (for local use).
    Plain,
}

/// Where and how to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serving {
    /// Address and port (port 0 picks a free one).
    pub addr: SocketAddr,
    /// TLS mode.
    pub tls: Tls,
}

#[derive(Clone)]
struct AppState {
    scheduler: Arc<Scheduler>,
    sync: Arc<SyncTracker>,
    configz: Arc<serde_json::Value>,
}

/// A running server.
#[derive(Debug)]
pub struct ServerHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    handle: axum_server::Handle<SocketAddr>,
    task: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    /// Stops accepting, lets open requests finish for up to `grace`, and waits.
    pub async fn stop(self, grace: Duration) {
        self.handle.graceful_shutdown(Some(grace));
        let _ = tokio::time::timeout(grace + Duration::from_secs(1), self.task).await;
    }
}

/// The router of every endpoint.
pub fn router(
    scheduler: Arc<Scheduler>,
    sync: Arc<SyncTracker>,
    config: serde_json::Value,
) -> Router {
    let state = AppState {
        scheduler,
        sync,
        configz: Arc::new(config),
    };
    Router::new()
        .route("/healthz", get(ok))
        .route("/livez", get(ok))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/configz", get(configz))
        .with_state(state)
}

async fn ok() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<AppState>) -> Response {
    if s.sync.all_synced() {
        "ok".into_response()
    } else {
        let pending = s.sync.pending().join(", ");
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]informer-sync failed: waiting for the first list of {pending}\nreadyz check failed\n"),
        )
            .into_response()
    }
}

async fn metrics(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let text = s.scheduler.metrics().encode();
    let wants_openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    if wants_openmetrics {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            openmetrics_to_prometheus(&text),
        )
            .into_response()
    }
}

async fn configz(State(s): State<AppState>) -> Response {
    // The feature gates in effect beside the configuration: upstream takes them on the
    // command line, so they are not part of componentconfig.
    let body = serde_json::json!({
        "componentconfig": *s.configz,
        "featureGates": s.scheduler.handle().features().effective(),
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Rewrites OpenMetrics text (what prometheus-client writes) as Prometheus text format
/// 0.0.4: counters are described under their `_total` sample name, and the `# UNIT` and
/// `# EOF` lines go.
pub fn openmetrics_to_prometheus(text: &str) -> String {
    let counters: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rewritten = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match rewritten {
            Some(l) => out.push_str(l.trim_end()),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

async fn tls_config(tls: &Tls) -> Result<Option<RustlsConfig>, RunError> {
    // kube and rustls may both be built with a provider; pick ring for the server.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match tls {
        Tls::Plain => Ok(None),
        Tls::Files { cert, key } => RustlsConfig::from_pem_file(cert, key)
            .await
            .map(Some)
            .map_err(|e| {
                RunError::Serving(format!(
                    "loading {} and {}: {e}",
                    cert.display(),
                    key.display()
                ))
            }),
        Tls::SelfSigned => {
            let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
            let host = crate::run::hostname();
            if !host.is_empty() && !names.contains(&host) {
                names.push(host);
            }
            let ck = rcgen::generate_simple_self_signed(names).map_err(|e| {
                RunError::Serving(format!("generating a self-signed certificate: {e}"))
            })?;
            let cert = ck.cert.pem().into_bytes();
            let key = ck.signing_key.serialize_pem().into_bytes();
            RustlsConfig::from_pem(cert, key)
                .await
                .map(Some)
                .map_err(|e| RunError::Serving(format!("using the self-signed certificate: {e}")))
        }
    }
}

/// Binds and starts serving `router`.
pub async fn start(serving: &Serving, router: Router) -> Result<ServerHandle, RunError> {
    let tls = tls_config(&serving.tls).await?;
    let listener = std::net::TcpListener::bind(serving.addr)
        .map_err(|e| RunError::Serving(format!("listening on {}: {e}", serving.addr)))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| RunError::Serving(format!("listening on {}: {e}", serving.addr)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| RunError::Serving(format!("listening on {}: {e}", serving.addr)))?;
    let handle = axum_server::Handle::new();
    let service = router.into_make_service();
    let task = match tls {
        Some(cfg) => {
            let server = axum_server::from_tcp_rustls(listener, cfg)
                .map_err(|e| RunError::Serving(format!("serving on {addr}: {e}")))?
                .handle(handle.clone());
            tokio::spawn(async move {
                if let Err(e) = server.serve(service).await {
                    tracing::error!(error = %e, "HTTPS server stopped");
                }
            })
        }
        None => {
            let server = axum_server::from_tcp(listener)
                .map_err(|e| RunError::Serving(format!("serving on {addr}: {e}")))?
                .handle(handle.clone());
            tokio::spawn(async move {
                if let Err(e) = server.serve(service).await {
                    tracing::error!(error = %e, "HTTP server stopped");
                }
            })
        }
    };
    tracing::info!(%addr, tls = !matches!(serving.tls, Tls::Plain), "serving health, metrics and configz");
    Ok(ServerHandle { addr, handle, task })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Accepts any certificate: the test only checks that TLS is spoken.
    #[derive(Debug)]
    struct AnyCert;

    impl rustls::client::danger::ServerCertVerifier for AnyCert {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_self_signed_certificate_serves_https() {
        let router = Router::new().route("/healthz", get(ok));
        let serving = Serving {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: Tls::SelfSigned,
        };
        let server = start(&serving, router).await.expect("serving");
        let addr = server.addr;
        let reply = tokio::task::spawn_blocking(move || {
            let config = rustls::ClientConfig::builder()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCert))
                .with_no_client_auth();
            let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
            let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
            let sock = std::net::TcpStream::connect(addr).expect("connect");
            let mut tls = rustls::StreamOwned::new(conn, sock);
            tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .expect("write");
            let mut out = Vec::new();
            // A close without close_notify is fine here: the reply is complete.
            let _ = tls.read_to_end(&mut out);
            String::from_utf8_lossy(&out).into_owned()
        })
        .await
        .expect("client thread");
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("ok"), "{reply}");
        server.stop(Duration::from_millis(100)).await;
    }

    #[test]
    fn counters_are_described_under_their_total_name() {
        let om = "# HELP scheduler_schedule_attempts Number of attempts.\n\
                  # TYPE scheduler_schedule_attempts counter\n\
                  scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 3\n\
                  # HELP scheduler_pending_pods Pending pods.\n\
                  # TYPE scheduler_pending_pods gauge\n\
                  scheduler_pending_pods{queue=\"active\"} 0\n\
                  # UNIT scheduler_x seconds\n\
                  # EOF\n";
        assert_eq!(
            openmetrics_to_prometheus(om),
            "# HELP scheduler_schedule_attempts_total Number of attempts.\n\
             # TYPE scheduler_schedule_attempts_total counter\n\
             scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 3\n\
             # HELP scheduler_pending_pods Pending pods.\n\
             # TYPE scheduler_pending_pods gauge\n\
             scheduler_pending_pods{queue=\"active\"} 0\n"
        );
    }
}
