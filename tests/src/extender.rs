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
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

/// A running extender; stops when dropped.
pub struct ExtenderServer {
    addr: SocketAddr,
    prefix: String,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
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

impl ExtenderServer {
    /// Starts an extender serving `POST /scheduler/<verb>` with the given handlers.
    pub fn start(handlers: Vec<(&str, Handler)>) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
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
        Self::serve(app, "/scheduler", requests)
    }

    /// Serves an extender's own routes (an extender crate's router); `prefix` is the path
    /// its verbs hang under. Requests are not recorded.
    pub fn start_router(app: Router, prefix: &str) -> Self {
        Self::serve(app, prefix, Arc::new(Mutex::new(Vec::new())))
    }

    fn serve(app: Router, prefix: &str, requests: Arc<Mutex<Vec<(String, Value)>>>) -> Self {
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
