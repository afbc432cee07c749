//! A scheduler extender on 127.0.0.1 for the extender tests: it speaks upstream's JSON,
//! answers each verb through a closure of the test, and records every request.
//!
//! It runs on a thread and runtime of its own: a simulation blocks its only thread while a
//! filter call is out, so a server on that runtime could never answer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use parking_lot::Mutex;
use serde_json::Value;

/// What the extender answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this JSON body.
    Json(Value),
    /// This status code and an empty body.
    Status(u16),
    /// The reply, after a pause.
    Delayed(Duration, Box<Reply>),
}

/// Answers the request body of one verb.
pub type Handler = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// A handler from a closure.
pub fn handler(f: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Handler {
    Arc::new(f)
}

#[derive(Clone)]
struct Shared {
    handlers: Arc<BTreeMap<String, Handler>>,
    requests: Requests,
}

/// A running extender; stops when dropped.
pub struct ExtenderServer {
    addr: SocketAddr,
    prefix: String,
    requests: Requests,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ExtenderServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtenderServer")
            .field("addr", &self.addr)
            .finish()
    }
}

async fn serve_verb(
    State(shared): State<Shared>,
    Path(verb): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().push((verb.clone(), value.clone()));
    let Some(h) = shared.handlers.get(&verb).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut reply = h(&value);
    loop {
        match reply {
            Reply::Json(v) => return axum::Json(v).into_response(),
            Reply::Status(code) => {
                return StatusCode::from_u16(code)
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                    .into_response();
            }
            Reply::Delayed(d, next) => {
                tokio::time::sleep(d).await;
                reply = *next;
            }
        }
    }
}

type Requests = Arc<Mutex<Vec<(String, Value)>>>;

/// `POST /scheduler/<verb>` answered by the handlers, every request recorded.
fn recording_router(handlers: Vec<(&str, Handler)>) -> (Router, Requests) {
    let requests: Requests = Arc::new(Mutex::new(Vec::new()));
    let shared = Shared {
        handlers: Arc::new(
            handlers
                .into_iter()
                .map(|(verb, h)| (verb.to_string(), h))
                .collect(),
        ),
        requests: requests.clone(),
    };
    let app = Router::new()
        .route("/scheduler/{verb}", post(serve_verb))
        .with_state(shared);
    (app, requests)
}

impl ExtenderServer {
    /// Starts an extender serving `POST /scheduler/<verb>` with the given handlers.
    pub fn start(handlers: Vec<(&str, Handler)>) -> Self {
        let (app, requests) = recording_router(handlers);
        Self::serve(app, "/scheduler", requests)
    }

    /// Serves an extender's own routes (an extender crate's router); `prefix` is the path
    /// its verbs hang under. Requests are not recorded.
    pub fn start_router(app: Router, prefix: &str) -> Self {
        Self::serve(app, prefix, Arc::new(Mutex::new(Vec::new())))
    }

    /// Like [`ExtenderServer::start`], over HTTPS with the certificate of `extender.test`
    /// from tests/fixtures/extender-tls; with `client_auth` the client must present a
    /// certificate signed by the test CA.
    pub fn start_tls(handlers: Vec<(&str, Handler)>, client_auth: bool) -> Self {
        let (app, requests) = recording_router(handlers);
        let tls = tls_server_config(client_auth);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("test-extender-tls".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("extender runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
                    let accept_loop = async {
                        loop {
                            let Ok((tcp, _)) = listener.accept().await else {
                                continue;
                            };
                            let acceptor = acceptor.clone();
                            let app = app.clone();
                            tokio::spawn(async move {
                                // A client that fails the handshake just goes away.
                                let Ok(stream) = acceptor.accept(tcp).await else {
                                    return;
                                };
                                let service = hyper_util::service::TowerToHyperService::new(app);
                                let _ = hyper::server::conn::http1::Builder::new()
                                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                    .await;
                            });
                        }
                    };
                    tokio::select! {
                        _ = accept_loop => {}
                        _ = stopped => {}
                    }
                });
                runtime.shutdown_background();
            })
            .expect("extender thread");
        Self {
            addr,
            prefix: "/scheduler".into(),
            requests,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn serve(app: Router, prefix: &str, requests: Requests) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("test-extender".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("extender runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stopped => {}
                    }
                });
                // Requests still sleeping in a delayed reply are dropped with the runtime.
                runtime.shutdown_background();
            })
            .expect("extender thread");
        Self {
            addr,
            prefix: prefix.trim_end_matches('/').to_string(),
            requests,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The `urlPrefix` to configure.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.prefix)
    }

    /// The `urlPrefix` of an HTTPS extender.
    pub fn https_url(&self) -> String {
        format!("https://{}{}", self.addr, self.prefix)
    }

    /// The bodies received for `verb`, oldest first.
    pub fn requests(&self, verb: &str) -> Vec<Value> {
        self.requests
            .lock()
            .iter()
            .filter(|(v, _)| v == verb)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// How many requests arrived for any verb.
    pub fn request_count(&self) -> usize {
        self.requests.lock().len()
    }
}

impl Drop for ExtenderServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A `urlPrefix` where nothing listens: calls to it are refused at once.
pub fn unreachable_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    drop(listener);
    format!("http://{addr}/scheduler")
}

/// A file of the test TLS material (tests/fixtures/extender-tls).
pub fn tls_fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/extender-tls")
        .join(name)
}

/// The TLS configuration of a test server with the `extender.test` certificate, asking
/// for client certificates signed by the test CA when `client_auth`.
pub(crate) fn tls_server_config(client_auth: bool) -> rustls::ServerConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(tls_fixture("server.crt"))
            .expect("server.crt")
            .collect::<Result<_, _>>()
            .expect("server certificate");
    let key = PrivateKeyDer::from_pem_file(tls_fixture("server.key")).expect("server.key");
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions");
    let builder = if client_auth {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(tls_fixture("ca.crt")).expect("ca.crt") {
            roots.add(c.expect("CA certificate")).expect("CA accepted");
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("client verifier");
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    builder
        .with_single_cert(chain, key)
        .expect("server certificate and key")
}
