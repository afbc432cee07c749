//! The HTTP stack under kubesched's API clients: kube's own layers (base URI, retries of
//! 429/503/504, authentication, extra headers) over a hyper connection pool that offers
//! HTTP/2 by ALPN on TLS, as client-go does. An API server that accepts it (every
//! kube-apiserver does) then carries every request and watch of one client on a single
//! multiplexed connection; over plain HTTP, or when h2 is refused, the pool speaks
//! HTTP/1.1 and the in-flight bound of [`crate::ratelimit::InFlightLayer`] bounds its
//! connections. Every watch answer passes [`crate::watch_lines`]'s check, so a cut or
//! garbled event makes the watcher list again instead of vanishing.

use std::time::Duration;

use kube::Config;
use kube::client::{Body, ClientBuilder, ConfigExt};
use tower::{BoxError, ServiceBuilder, ServiceExt};

use crate::error::RunError;

/// The service [`client_builder`] builds on.
pub type ApiService = tower::util::BoxService<
    http::Request<Body>,
    http::Response<crate::watch_lines::GuardedBody>,
    BoxError,
>;

/// How long an idle pooled connection is kept (client-go's idle timeout).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How often an HTTP/2 connection is pinged while requests are open, and how long a ping
/// may go unanswered before the connection is given up (client-go's 30 s / 15 s health
/// check: a half-open connection fails its requests instead of hanging them).
const H2_PING_INTERVAL: Duration = Duration::from_secs(30);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(15);

fn client_error(e: impl std::fmt::Display) -> RunError {
    RunError::Client(e.to_string())
}

/// A kube client builder for `config` on the pool described above. `request_timeout`
/// bounds each request from sending to its response headers (the lease client's
/// renewDeadline); it replaces a socket read timeout, which would cut a shared HTTP/2
/// connection whenever it is idle.
pub fn client_builder(
    config: &Config,
    request_timeout: Option<Duration>,
) -> Result<ClientBuilder<ApiService>, RunError> {
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    let tls = config.rustls_client_config().map_err(client_error)?;
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(client_error)?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = https.enable_all_versions().wrap_connector(http);
    let pool = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .http2_keep_alive_interval(H2_PING_INTERVAL)
        .http2_keep_alive_timeout(H2_PING_TIMEOUT)
        .build::<_, Body>(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| {
            tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry())
        }))
        .option_layer(config.auth_layer().map_err(client_error)?)
        .layer(config.extra_headers_layer().map_err(client_error)?)
        .option_layer(request_timeout.map(tower::timeout::TimeoutLayer::new))
        .map_err(BoxError::from)
        // Watch answers are checked line by line (see crate::watch_lines).
        .layer_fn(crate::watch_lines::WatchLineGuard::new)
        .service(pool)
        .boxed();
    Ok(ClientBuilder::new(
        service,
        config.default_namespace.clone(),
    ))
}
