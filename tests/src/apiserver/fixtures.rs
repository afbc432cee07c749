//! Helpers for the end-to-end tests of the kube backend: objects, a fast configuration,
//! run options pointing at a [`TestApiServer`], and small readers of what the server holds.

use std::net::SocketAddr;
use std::time::Duration;

use kubesched_config::LoadedConfig;
use kubesched_live::events::EventSettings;
use kubesched_live::{RunOptions, Serving, Tls, Tuning};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{RequestRecord, TestApiServer};

/// The lease the test configuration elects on.
pub const LEASE_NAME: &str = "kubesched-test";
/// Its namespace.
pub const LEASE_NAMESPACE: &str = "kube-system";

/// A ready node with this much CPU (and plenty of memory and pod slots).
pub fn node(name: &str, cpu: &str) -> Value {
    let resources = json!({"cpu": cpu, "memory": "16Gi", "pods": "110"});
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

/// A pending pod of the default scheduler in `default` requesting this much CPU.
pub fn pod(name: &str, cpu: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Pending"},
    })
}

/// A pod already running on `node`.
pub fn running_pod(name: &str, cpu: &str, node: &str) -> Value {
    let mut p = pod(name, cpu);
    p["spec"]["nodeName"] = json!(node);
    p["status"]["phase"] = json!("Running");
    p
}

/// A configuration with short leader election timings and fast retries.
pub fn config(leader_elect: bool) -> LoadedConfig {
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
clientConnection:
  qps: 500
  burst: 500
leaderElection:
  leaderElect: {leader_elect}
  leaseDuration: 2s
  renewDeadline: 1500ms
  retryPeriod: 250ms
  resourceName: {LEASE_NAME}
  resourceNamespace: {LEASE_NAMESPACE}
"
    );
    kubesched_config::load_str(&text, "test-config.yaml").expect("valid test configuration")
}

/// Run options against `server`: plain HTTP on a free loopback port, events retried fast.
pub fn options(server: &TestApiServer, leader_elect: bool, identity: &str) -> RunOptions {
    options_for(server.write_kubeconfig(), leader_elect, identity)
}

/// With `KUBESCHED_TEST_LOG` set (a tracing filter such as `debug` or
/// `kubesched_queue=trace`), the scheduler's logs of a cluster-mode test go to the test's
/// output, to read why a run under `cargo xtask stress` failed. A test binary that
/// installs its own subscriber first keeps it.
pub fn test_logs() {
    if let Ok(filter) = std::env::var("KUBESCHED_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_ansi(false)
            .with_test_writer()
            .try_init();
    }
}

/// Like [`options`], for the API server of a kubeconfig file.
pub fn options_for(
    kubeconfig: std::path::PathBuf,
    leader_elect: bool,
    identity: &str,
) -> RunOptions {
    test_logs();
    let mut o = RunOptions::new(config(leader_elect));
    o.kubeconfig = Some(kubeconfig);
    o.serving = Some(Serving {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        tls: Tls::Plain,
        auth: None,
    });
    o.identity = Some(identity.to_string());
    o.shutdown_timeout = Duration::from_secs(5);
    o.seed = Some(1);
    o.tuning = Tuning {
        watch_page_size: 500,
        events: EventSettings {
            retry_interval: Duration::from_millis(100),
            max_tries: 5,
            ..EventSettings::default()
        },
    };
    o
}

/// The node a pod is bound to.
pub fn node_of(server: &TestApiServer, name: &str) -> Option<String> {
    server.get("pods", "default", name).and_then(|p| {
        p.pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// Events with this reason.
pub fn events(server: &TestApiServer, reason: &str) -> Vec<Value> {
    server
        .list("events")
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect()
}

/// Events with this reason about this pod.
pub fn events_of(server: &TestApiServer, reason: &str, pod: &str) -> Vec<Value> {
    events(server, reason)
        .into_iter()
        .filter(|e| e["regarding"]["name"] == pod)
        .collect()
}

/// Requests matching a method and a path suffix (query ignored).
pub fn requests_to(server: &TestApiServer, method: &str, path_suffix: &str) -> Vec<RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == method && r.path.ends_with(path_suffix))
        .collect()
}

/// The holder identity of the test lease ("" when free or absent).
pub fn lease_holder(server: &TestApiServer) -> String {
    server
        .get("leases", LEASE_NAMESPACE, LEASE_NAME)
        .and_then(|l| {
            l.pointer("/spec/holderIdentity")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// A plain HTTP GET to the scheduler's endpoints: (status code, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http_get_with(addr, path, None).await
}

/// Like [`http_get`], with a bearer token.
pub async fn http_get_with(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    http_get_headers(addr, path, &auth).await
}

/// Like [`http_get`], with an `Accept` header.
pub async fn http_get_accept(addr: SocketAddr, path: &str, accept: &str) -> (u16, String) {
    http_get_headers(addr, path, &format!("Accept: {accept}\r\n")).await
}

/// A plain HTTP GET with extra header lines (each ending in CRLF).
async fn http_get_headers(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connecting");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("writing");
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.expect("reading");
    status_and_body(&buf)
}

/// GET `path` (with a bearer token if given) and the answer as it came: status code,
/// header block and body bytes (for binary bodies such as a CPU profile, sent with a
/// Content-Length, never chunked).
pub async fn http_get_bytes(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> (u16, String, Vec<u8>) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connecting");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("writing");
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.expect("reading");
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(buf.len(), |at| at + 4);
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head, buf[split..].to_vec())
}

/// A CA (its PEM) and certificates it signs for client authentication.
pub struct TestCa {
    /// The CA certificate, PEM.
    pub pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

/// A client identity: certificate chain and key.
pub type ClientIdentity = (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

impl TestCa {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let pem = params.self_signed(&key).expect("ca").pem();
        Self {
            pem,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A client certificate with this common name and organizations (groups).
    pub fn client(&self, cn: &str, orgs: &[&str]) -> ClientIdentity {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        for o in orgs {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
    }
}

/// Accepts the server's certificate whatever it is: the tests check who the server lets
/// in, not who it is (its certificate is self-signed).
#[derive(Debug)]
struct AnyServerCert;

impl rustls::client::danger::ServerCertVerifier for AnyServerCert {
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

/// GET `path` over HTTPS, with a client certificate if given and these extra headers;
/// the status code and body.
pub async fn https_get(
    addr: SocketAddr,
    path: &str,
    identity: Option<ClientIdentity>,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(AnyServerCert));
    let config = match identity {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).expect("identity"),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connecting");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).await.expect("writing");
    let mut buf = Vec::new();
    // A server that closes without TLS close_notify ends the read with an error after the
    // answer: what was read is the answer.
    let _ = tls.read_to_end(&mut buf).await;
    status_and_body(&buf)
}

/// An HTTP/1.1 answer's status code and (dechunked) body, as text.
fn status_and_body(answer: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(answer);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, dechunk(body))
}

/// Removes HTTP/1.1 chunked framing, if any.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if n == 0 {
            return out;
        }
        if after.len() < n {
            return body.to_string();
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
}

/// Runs `fut` with a time bound, failing the test with `what` when it passes.
pub async fn bounded<T>(secs: u64, what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {secs} s: {what}"),
    }
}

/// Fails unless every request the server received is granted by kubesched's RBAC rows
/// for the compiled-in plugins (the fixed table and the rows derived from the plugins'
/// kind declarations: what the deploy renderer turns into the ClusterRole).
pub fn assert_rbac_covers(server: &TestApiServer) {
    let rules = kubesched_live::access::rules_for(kubesched_framework::registry::plugins());
    // `/version` is readable by everyone (the default `system:public-info-viewer` role).
    for r in server
        .requests()
        .into_iter()
        .filter(|r| r.path != "/version")
    {
        let (group, resource, verb) = r
            .rbac
            .clone()
            .unwrap_or_else(|| panic!("a request to an unknown resource: {} {}", r.method, r.path));
        let granted = kubesched_live::access::grants(&rules, &group, &resource, &verb)
            || kubesched_live::rbac::BOUND_ROLES.iter().any(|b| {
                r.path.contains(&format!("/namespaces/{}/", b.namespace))
                    && b.grants.api_group == group
                    && b.grants.resource == resource
                    && b.grants.verbs.contains(&verb.as_str())
            });
        assert!(
            granted,
            "{verb} {group}/{resource} is not in the RBAC table ({} {})",
            r.method, r.path
        );
    }
}
