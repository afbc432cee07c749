//! The HTTP endpoints of the secure port (10259 by default): `/healthz`, `/livez`,
//! `/readyz` (ready once every watcher has listed), `/metrics` (upstream's metric names,
//! Prometheus text format or OpenMetrics when asked for), `/configz` (the effective
//! configuration) and the z-pages `/statusz` and `/flagz` ([`crate::zpages`]). TLS with the given certificate, or a self-signed one made at start-up,
//! asking for client certificates when a client CA is given; every request goes through
//! [`crate::auth`] (delegated authentication and authorization) when it is configured.
//! Plain HTTP only when asked for (local use).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// A self-signed pair kept in this directory as `kube-scheduler.crt` and
    /// `kube-scheduler.key` (`--cert-dir`): reused when both are there, else generated
    /// and written, as upstream does.
    SelfSignedIn {
        /// The directory.
        dir: PathBuf,
    },
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
    /// Delegated authentication and authorization; None serves every request (only
    /// for local use: `--plain-http`).
    pub auth: Option<crate::auth::DelegatedAuth>,
}

#[derive(Clone)]
struct AppState {
    scheduler: Arc<Scheduler>,
    requests: Arc<crate::requests::RequestCounts>,
    sync: Arc<SyncTracker>,
    /// Whether this instance leads, when it takes part in leader election.
    leading: Option<Arc<AtomicBool>>,
    configz: Arc<serde_json::Value>,
    zpages: Arc<crate::zpages::ZPages>,
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

/// The router of every endpoint, behind the gatekeeper when there is one.
pub fn router(
    scheduler: Arc<Scheduler>,
    requests: Arc<crate::requests::RequestCounts>,
    sync: Arc<SyncTracker>,
    leading: Option<Arc<AtomicBool>>,
    config: serde_json::Value,
    mut zpages: crate::zpages::ZPages,
    gate: Option<Arc<crate::auth::Gatekeeper>>,
) -> Router {
    // What /statusz lists: the read-only paths served here (the profiling handlers are
    // prefixes, unlisted upstream too).
    zpages.paths = ["/configz", "/healthz", "/livez", "/metrics", "/readyz"]
        .map(String::from)
        .to_vec();
    if zpages.flags.is_some() {
        zpages.paths.push("/flagz".into());
    }
    let (statusz_on, flagz_on) = (zpages.statusz, zpages.flags.is_some());
    let state = AppState {
        scheduler,
        requests,
        sync,
        leading,
        configz: Arc::new(config),
        zpages: Arc::new(zpages),
    };
    let mut router = Router::new()
        .route("/healthz", get(ok))
        .route("/livez", get(ok))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/configz", get(configz));
    if statusz_on {
        router = router.route("/statusz", get(statusz));
    }
    if flagz_on {
        router = router.route("/flagz", get(flagz));
    }
    // Upstream serves its profiling handlers on the secure port when enableProfiling is
    // on, behind the same authentication and authorization as every other path.
    #[cfg(feature = "profiling")]
    let router = if profiling_asked(&state.configz) {
        router
            .route("/debug/pprof/", get(crate::profile::index))
            .route("/debug/pprof/profile", get(crate::profile::handler))
            .route("/debug/pprof/{name}", get(crate::profile::unknown))
    } else {
        router
    };
    let router = router.with_state(state);
    match gate {
        Some(gate) => router.layer(axum::middleware::from_fn_with_state(
            gate,
            crate::auth::guard,
        )),
        None => router,
    }
}

/// Whether the configuration (as /configz shows it) asks for the profiling handlers.
#[cfg(feature = "profiling")]
fn profiling_asked(configz: &serde_json::Value) -> bool {
    configz
        .get("enableProfiling")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
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
    let mut text = s.scheduler.metrics().encode();
    let wants_openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    if wants_openmetrics {
        // The client and process families go before the closing `# EOF`.
        let clients = s.component_metrics(true);
        match text.rfind("# EOF") {
            Some(at) => text.insert_str(at, &clients),
            None => text.push_str(&clients),
        }
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
            openmetrics_to_prometheus(&text) + &s.component_metrics(false),
        )
            .into_response()
    }
}

/// The lease name client-go's elector reports under: kube-scheduler names its elector so,
/// whatever the Lease object is called.
const ELECTOR_NAME: &str = "kube-scheduler";

impl AppState {
    /// What every Kubernetes component serves beside its own metrics: client-go's client
    /// families, the leader election gauge and the process collector.
    fn component_metrics(&self, openmetrics: bool) -> String {
        use std::fmt::Write as _;
        let mut out = self.requests.metrics_text(openmetrics);
        if let Some(leading) = &self.leading {
            let _ = writeln!(
                out,
                "# HELP leader_election_master_status Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.\n# TYPE leader_election_master_status gauge\nleader_election_master_status{{name=\"{ELECTOR_NAME}\"}} {}",
                u8::from(leading.load(Ordering::SeqCst))
            );
        }
        if let Some(process) = crate::process::ProcessStats::of_self() {
            out.push_str(&process.metrics_text(openmetrics));
        }
        out
    }
}

async fn statusz(State(s): State<AppState>, headers: HeaderMap) -> Response {
    crate::zpages::statusz(&s.zpages, &headers)
}

async fn flagz(State(s): State<AppState>, headers: HeaderMap) -> Response {
    crate::zpages::flagz(&s.zpages, &headers)
}

async fn configz(State(s): State<AppState>) -> Response {
    // The feature gates in effect beside the configuration: upstream takes them on the
    // command line, so they are not part of componentconfig.
    let body = serde_json::json!({
        "componentconfig": *s.configz,
        "emulatedVersion": s.scheduler.handle().features().version().to_string(),
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

/// The server's certificate chain and key, in DER.
type CertAndKey = (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

fn read_pem_files(cert: &Path, key: &Path) -> Result<CertAndKey, RunError> {
    use rustls::pki_types::pem::PemObject;
    let chain = rustls::pki_types::CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| RunError::Serving(format!("reading {}: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(RunError::Serving(format!(
            "{}: no PEM certificate in the file",
            cert.display()
        )));
    }
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key)
        .map_err(|e| RunError::Serving(format!("reading {}: {e}", key.display())))?;
    Ok((chain, key))
}

fn generate_self_signed() -> Result<(Vec<String>, rcgen::CertifiedKey<rcgen::KeyPair>), RunError> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let host = crate::connect::hostname();
    if !host.is_empty() && !names.contains(&host) {
        names.push(host);
    }
    let ck = rcgen::generate_simple_self_signed(names.clone())
        .map_err(|e| RunError::Serving(format!("generating a self-signed certificate: {e}")))?;
    Ok((names, ck))
}

fn self_signed() -> Result<CertAndKey, RunError> {
    let (_, ck) = generate_self_signed()?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
    Ok((vec![ck.cert.der().clone()], key))
}

/// The pair's base name in `--cert-dir`, kube-scheduler's.
const PAIR_NAME: &str = "kube-scheduler";

/// The self-signed pair of `--cert-dir`: read when both files are there, else made and
/// written (the key readable by the owner only).
fn self_signed_in(dir: &Path) -> Result<CertAndKey, RunError> {
    let cert = dir.join(format!("{PAIR_NAME}.crt"));
    let key = dir.join(format!("{PAIR_NAME}.key"));
    if cert.is_file() && key.is_file() {
        return read_pem_files(&cert, &key);
    }
    let (names, ck) = generate_self_signed()?;
    let write = |path: &Path, text: &str, mode: u32| -> Result<(), RunError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| RunError::Serving(format!("writing {}: {e}", path.display())))
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| RunError::Serving(format!("creating {}: {e}", dir.display())))?;
    write(&cert, &ck.cert.pem(), 0o644)?;
    write(&key, &ck.signing_key.serialize_pem(), 0o600)?;
    tracing::info!(cert = %cert.display(), names = ?names, "generated a self-signed serving certificate");
    read_pem_files(&cert, &key)
}

/// The TLS configuration: the server's certificate, and when `client_roots` are given a
/// verifier that accepts (but does not require) client certificates chaining to one of
/// them (the gatekeeper tells which authenticator a certificate belongs to).
async fn tls_config(
    tls: &Tls,
    client_roots: &[rustls::pki_types::CertificateDer<'static>],
) -> Result<Option<RustlsConfig>, RunError> {
    // kube and rustls may both be built with a provider; pick ring for the server.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (chain, key) = match tls {
        Tls::Plain => return Ok(None),
        Tls::Files { cert, key } => read_pem_files(cert, key)?,
        Tls::SelfSigned => self_signed()?,
        Tls::SelfSignedIn { dir } => self_signed_in(dir)?,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| RunError::Serving(format!("TLS configuration: {e}")))?;
    let builder = if client_roots.is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for c in client_roots {
            roots
                .add(c.clone())
                .map_err(|e| RunError::Serving(format!("a client CA certificate: {e}")))?;
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| RunError::Serving(format!("the client CAs: {e}")))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| RunError::Serving(format!("using the serving certificate: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(RustlsConfig::from_config(Arc::new(config))))
}

/// Binds and starts serving `router`, asking TLS clients for certificates chaining to
/// `client_roots` (the gatekeeper's [`AuthnSources::all_roots`](crate::auth_sources::AuthnSources::all_roots)).
pub async fn start(
    serving: &Serving,
    router: Router,
    client_roots: &[rustls::pki_types::CertificateDer<'static>],
) -> Result<ServerHandle, RunError> {
    let tls = tls_config(&serving.tls, client_roots).await?;
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
    if serving.auth.is_none() {
        tracing::warn!(%addr, "serving /metrics and /configz without authentication or authorization: for local use only");
    }
    tracing::info!(%addr, tls = !matches!(serving.tls, Tls::Plain), authorized = serving.auth.is_some(), "serving health, metrics and configz");
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
            auth: None,
        };
        let server = start(&serving, router, &[]).await.expect("serving");
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

    /// A CA and a client certificate it signed, for `CN=name, O=group`, in DER, with
    /// the CA in a PEM file.
    fn client_identity(
        dir: &Path,
        name: &str,
        group: &str,
    ) -> (
        PathBuf,
        rustls::pki_types::CertificateDer<'static>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ) {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-ca");
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("ca");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, group);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &*ca).expect("client cert");
        let ca_file = dir.join(format!("ca-{name}.pem"));
        std::fs::write(&ca_file, ca.pem()).expect("writing the CA");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        (ca_file, cert.der().clone(), key)
    }

    fn https_get(
        addr: SocketAddr,
        path: &str,
        identity: Option<(
            rustls::pki_types::CertificateDer<'static>,
            rustls::pki_types::PrivateKeyDer<'static>,
        )>,
    ) -> String {
        let builder = rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert));
        let config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(vec![cert], key)
                .expect("client identity"),
            None => builder.with_no_client_auth(),
        };
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
        let sock = std::net::TcpStream::connect(addr).expect("connect");
        let mut tls = rustls::StreamOwned::new(conn, sock);
        let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        tls.write_all(req.as_bytes()).expect("write");
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_certificate_authenticates_and_anonymous_is_forbidden() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir =
            std::env::temp_dir().join(format!("kubesched-server-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (ca_file, cert, key) = client_identity(&dir, "admin", "system:masters");
        let auth = crate::auth::DelegatedAuth {
            client_ca_file: Some(ca_file),
            ..crate::auth::DelegatedAuth::default()
        };
        let gate = Arc::new(
            crate::auth::Gatekeeper::with_clients(auth.clone(), None, None).expect("gatekeeper"),
        );
        let roots = gate.sources().all_roots();
        let router = Router::new()
            .route("/healthz", get(ok))
            .route("/metrics", get(ok))
            .layer(axum::middleware::from_fn_with_state(
                gate,
                crate::auth::guard,
            ));
        let serving = Serving {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: Tls::SelfSigned,
            auth: Some(auth),
        };
        let server = start(&serving, router, &roots).await.expect("serving");
        let addr = server.addr;
        let replies = tokio::task::spawn_blocking(move || {
            (
                https_get(addr, "/metrics", None),
                https_get(addr, "/healthz", None),
                https_get(addr, "/metrics", Some((cert, key))),
            )
        })
        .await
        .expect("client thread");
        assert!(replies.0.starts_with("HTTP/1.1 403"), "{}", replies.0);
        assert!(
            replies
                .0
                .contains(r#"User \"system:anonymous\" cannot get path \"/metrics\""#),
            "{}",
            replies.0
        );
        assert!(replies.1.starts_with("HTTP/1.1 200"), "{}", replies.1);
        // system:masters from the certificate's O: allowed without a review.
        assert!(replies.2.starts_with("HTTP/1.1 200"), "{}", replies.2);
        server.stop(Duration::from_millis(100)).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_cert_dir_pair_is_written_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("kubesched-cert-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = self_signed_in(&dir).expect("generated");
        let cert = dir.join("kube-scheduler.crt");
        let key = dir.join("kube-scheduler.key");
        assert!(cert.is_file() && key.is_file());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key).expect("key").permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is the owner's only: {mode:o}");
        // A restart serves the same certificate (clients that pinned it keep working).
        let second = self_signed_in(&dir).expect("read back");
        assert_eq!(first.0, second.0);
        // A broken file is an error naming it, never a silent new pair.
        std::fs::write(&cert, "garbage").expect("write");
        let e = self_signed_in(&dir).expect_err("broken");
        assert!(e.to_string().contains("kube-scheduler.crt"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
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
