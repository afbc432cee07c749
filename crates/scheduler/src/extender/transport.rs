//! HTTP(S) to one extender: a pooled hyper client with upstream's TLS rules, driven by a
//! runtime of its own.
//!
//! Every call runs on the `kubesched-extender-io` runtime, never on the caller's: the
//! scheduling cycle blocks on a filter or prioritize call from its worker thread (which
//! may be the only thread of a simulation's runtime), and binding and preemption await
//! the call from their async tasks. Either way the request makes progress whatever the
//! caller's runtime is doing, so waiting on it cannot deadlock.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode, Uri};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kubesched_config::{DEFAULT_EXTENDER_HTTP_TIMEOUT, Extender as ExtenderConfig};
use kubesched_framework::ExtenderError;
use rustls::ClientConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// The runtime every extender call runs on, started with the first extender.
fn io_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kubesched-extender-io")
            .enable_all()
            .build()
            // Without a runtime no extender can be called at all; there is nothing to
            // fall back to.
            .expect("starting the extender I/O runtime")
    })
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One extender's client: base URL, timeout and connection pool.
#[derive(Clone)]
pub(crate) struct Transport {
    url_prefix: String,
    timeout: Duration,
    client: HttpsClient,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("url_prefix", &self.url_prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Transport {
    /// The client of one configured extender; fails on unusable TLS settings, as
    /// upstream's scheduler refuses to start then.
    pub(crate) fn new(cfg: &ExtenderConfig) -> Result<Self, String> {
        let timeout = if cfg.http_timeout.is_zero() {
            DEFAULT_EXTENDER_HTTP_TIMEOUT
        } else {
            cfg.http_timeout
        };
        let tls = tls_config(cfg)?;
        let builder = HttpsConnectorBuilder::new()
            .with_tls_config(tls.config)
            .https_or_http();
        let builder = match tls.server_name {
            Some(name) => builder.with_server_name_resolver(FixedServerNameResolver::new(name)),
            None => builder,
        };
        let connector = builder.enable_http1().build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self {
            url_prefix: cfg.url_prefix.clone(),
            timeout,
            client,
        })
    }

    /// `urlPrefix` without trailing slashes, `/`, the verb.
    pub(crate) fn url(&self, verb: &str) -> String {
        format!("{}/{verb}", self.url_prefix.trim_end_matches('/'))
    }

    /// The call as a future that owns everything it needs.
    fn post(
        &self,
        verb: &str,
        body: Vec<u8>,
    ) -> impl Future<Output = Result<Bytes, ExtenderError>> + Send + 'static {
        let url = self.url(verb);
        let verb = verb.to_string();
        let client = self.client.clone();
        let timeout = self.timeout;
        async move {
            let uri: Uri = url
                .parse()
                .map_err(|e| ExtenderError::new(format!("parse {url:?}: {e}")))?;
            let request = Request::post(uri)
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| ExtenderError::new(format!("Post {url:?}: {e}")))?;
            let deadline = Instant::now() + timeout;
            let response = match tokio::time::timeout_at(deadline.into(), client.request(request))
                .await
            {
                Err(_) => {
                    return Err(ExtenderError::new(format!(
                        "Post {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                    )));
                }
                Ok(Err(e)) => {
                    return Err(ExtenderError::new(format!(
                        "Post {url:?}: {}",
                        error_chain(&e)
                    )));
                }
                Ok(Ok(r)) => r,
            };
            if response.status() != StatusCode::OK {
                return Err(ExtenderError::new(format!(
                    "failed {verb} with extender at URL {url}, code {}",
                    response.status().as_u16()
                )));
            }
            match tokio::time::timeout_at(deadline.into(), response.into_body().collect()).await {
                Err(_) => Err(ExtenderError::new(format!(
                    "Post {url:?}: net/http: request canceled (Client.Timeout or context cancellation while reading body)"
                ))),
                Ok(Err(e)) => Err(ExtenderError::new(format!(
                    "reading the answer of {url}: {}",
                    error_chain(&e)
                ))),
                Ok(Ok(collected)) => Ok(collected.to_bytes()),
            }
        }
    }

    /// POSTs `body` to the verb and waits for the answer's body, blocking this thread.
    pub(crate) fn post_blocking(&self, verb: &str, body: Vec<u8>) -> Result<Bytes, ExtenderError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let call = self.post(verb, body);
        io_runtime().spawn(async move {
            // The receiver only goes away if the caller's thread died.
            let _ = tx.send(call.await);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(ExtenderError::new("the extender call was abandoned")))
    }

    /// POSTs `body` to the verb and awaits the answer's body.
    pub(crate) async fn post_async(
        &self,
        verb: &str,
        body: Vec<u8>,
    ) -> Result<Bytes, ExtenderError> {
        io_runtime()
            .spawn(self.post(verb, body))
            .await
            .unwrap_or_else(|e| Err(ExtenderError::new(format!("the extender call failed: {e}"))))
    }
}

/// An error and its causes, `: `-joined (hyper's own text alone says little).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

struct Tls {
    config: ClientConfig,
    server_name: Option<ServerName<'static>>,
}

/// Inline data wins over the file, as client-go reads them.
fn data_or_file(data: &str, file: &str, field: &str) -> Result<Option<Vec<u8>>, String> {
    if !data.is_empty() {
        use base64::Engine as _;
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| format!("tlsConfig.{field}: not base64: {e}"));
    }
    if !file.is_empty() {
        return std::fs::read(file)
            .map(Some)
            .map_err(|e| format!("open {file}: {e}"));
    }
    Ok(None)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Upstream's makeTransport: `enableHTTPS` without a CA skips verification; a CA is the
/// only root trusted; `insecure` with a CA is refused; `serverName` replaces the URL's host
/// for SNI and verification; a client certificate and key go together.
fn tls_config(cfg: &ExtenderConfig) -> Result<Tls, String> {
    let tls = cfg.tls_config.clone().unwrap_or_default();
    let ca = data_or_file(&tls.ca_data, &tls.ca_file, "caData")?;
    let cert = data_or_file(&tls.cert_data, &tls.cert_file, "certData")?;
    let key = data_or_file(&tls.key_data, &tls.key_file, "keyData")?;
    let insecure = tls.insecure || (cfg.enable_https && ca.is_none());
    if tls.insecure && ca.is_some() {
        return Err(
            "specifying a root certificates file with the insecure flag is not allowed".into(),
        );
    }
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert { provider }))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &ca {
            Some(pem) => {
                let mut any = false;
                for c in CertificateDer::pem_slice_iter(pem) {
                    let c = c.map_err(|e| format!("tlsConfig.caData: {e}"))?;
                    roots.add(c).map_err(|e| format!("tlsConfig.caData: {e}"))?;
                    any = true;
                }
                if !any {
                    return Err("tlsConfig.caData: no certificate found".into());
                }
            }
            None => {
                // Plain https without settings trusts the system's roots, as Go does.
                let native = rustls_native_certs::load_native_certs();
                for c in native.certs {
                    let _ = roots.add(c);
                }
            }
        }
        builder.with_root_certificates(roots)
    };
    let config = match (cert, key) {
        (Some(cert), Some(key)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("tlsConfig.certData: {e}"))?;
            if chain.is_empty() {
                return Err("tlsConfig.certData: no certificate found".into());
            }
            let key = PrivateKeyDer::from_pem_slice(&key)
                .map_err(|e| format!("tlsConfig.keyData: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("tlsConfig: client certificate: {e}"))?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => {
            return Err(
                "tlsConfig: a client certificate needs its key (keyFile or keyData)".into(),
            );
        }
        (None, Some(_)) => {
            return Err(
                "tlsConfig: a client key needs its certificate (certFile or certData)".into(),
            );
        }
    };
    let server_name = if tls.server_name.is_empty() {
        None
    } else {
        let name = tls
            .server_name
            .trim_start_matches('[')
            .trim_end_matches(']');
        Some(
            ServerName::try_from(name.to_string())
                .map_err(|e| format!("tlsConfig.serverName: {e}"))?,
        )
    };
    Ok(Tls {
        config,
        server_name,
    })
}

/// `insecure`: any server certificate is accepted; the handshake's signatures are still
/// checked so the connection is at least with the holder of that certificate.
#[derive(Debug)]
struct AcceptAnyServerCert {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
