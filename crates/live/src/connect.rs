//! The HTTP stack under kubesched's API clients: kube's own layers (base URI, retries of
//! 429/503/504, authentication, extra headers) over a hyper connection pool that offers
//! HTTP/2 by ALPN on TLS, as client-go does. An API server that accepts it (every
//! kube-apiserver does) then carries every request and watch of one client on a single
//! multiplexed connection; over plain HTTP, or when h2 is refused, the pool speaks
//! HTTP/1.1 and the in-flight bound of [`crate::ratelimit::InFlightLayer`] bounds its
//! connections. Every watch answer passes [`crate::watch_lines`]'s check, so a cut or
//! garbled event makes the watcher list again instead of vanishing.
//!
//! It also owns what every client starts from: the kubeconfig (or in-cluster) configuration,
//! the rate-limited clients of one scheduler ([`Clients`]) and this host's name, so that
//! authentication, serving and the run loop all build on it without needing each other.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kube::client::{Body, ClientBuilder, ConfigExt};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tower::{BoxError, ServiceBuilder, ServiceExt};

use crate::error::RunError;
use crate::ratelimit::{InFlightLayer, RateLimitLayer, TokenBucket};
use crate::requests::{CountLayer, RequestCounts};

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

/// This machine's host name (for the lease identity, event reporters and certificates).
pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kubesched".to_string())
}

/// Loads the client configuration: the given kubeconfig, else kube's inference.
pub async fn client_config(kubeconfig: Option<&Path>) -> Result<Config, RunError> {
    client_config_in(kubeconfig, None).await
}

/// [`client_config`] in the kubeconfig context `context` (kubectl's `--context`) instead of
/// the current one; with no kubeconfig file given, the one kubectl would read
/// (`KUBECONFIG`, else `~/.kube/config`).
pub async fn client_config_in(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Config, RunError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                // kube's own message quotes the path twice ('"/x"'): the file is named
                // once, in front, so say just what went wrong.
                let why = match &e {
                    kube::config::KubeconfigError::ReadConfig(io, _) => io.to_string(),
                    other => other.to_string(),
                };
                RunError::ClientConfig(format!("{}: {why}", path.display()))
            })?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| RunError::ClientConfig(format!("{}: {e}", path.display())))
        }
        None if context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| RunError::ClientConfig(e.to_string())),
        None => Config::infer()
            .await
            .map_err(|e| RunError::ClientConfig(e.to_string())),
    }
}

/// Requests the scheduling client keeps in flight at once (bindings, status patches,
/// victim deletions, lists); with the open watches this bounds its TCP connections.
pub const MAX_IN_FLIGHT: usize = 32;
/// Requests the event client keeps in flight at once.
pub const EVENTS_MAX_IN_FLIGHT: usize = 8;
/// Requests the leader election client keeps in flight at once.
pub const LEASE_MAX_IN_FLIGHT: usize = 2;

/// A kube client whose every request takes a token from a `qps`/`burst` bucket, with at
/// most [`MAX_IN_FLIGHT`] requests in flight.
pub fn build_client(config: Config, qps: f32, burst: i32) -> Result<Client, RunError> {
    build_bounded_client(config, qps, burst, MAX_IN_FLIGHT)
}

/// A kube client with its own `qps`/`burst` bucket and at most `in_flight` requests
/// waiting for their answer at once (the bucket is taken first, then a slot).
pub fn build_bounded_client(
    config: Config,
    qps: f32,
    burst: i32,
    in_flight: usize,
) -> Result<Client, RunError> {
    build_client_on(config, qps, burst, in_flight, None, None)
}

/// [`build_bounded_client`] with a bound on each request's wait for its answer, counting
/// its requests into `counts` when given.
fn build_client_on(
    config: Config,
    qps: f32,
    burst: i32,
    in_flight: usize,
    request_timeout: Option<Duration>,
    counts: Option<&Arc<RequestCounts>>,
) -> Result<Client, RunError> {
    let builder = client_builder(&config, request_timeout)?;
    let builder = builder
        .with_layer(&InFlightLayer::new(in_flight))
        .with_layer(&RateLimitLayer::new(TokenBucket::new(qps, burst)));
    Ok(match counts {
        Some(counts) => builder.with_layer(&CountLayer::new(counts.clone())).build(),
        None => builder.build(),
    })
}

/// The clients of one scheduler, each with its own rate limit and connections, as
/// kube-scheduler has them: leader election never waits behind scheduling traffic, and
/// neither do events.
#[derive(Clone)]
pub struct Clients {
    /// Watches, bindings, status patches, victim deletions.
    pub main: Client,
    /// Events.
    pub events: Client,
    /// The Lease (its requests time out after `renewDeadline`).
    pub lease: Client,
    /// What the three clients sent (nothing is counted on clients built by the caller).
    pub counts: Arc<RequestCounts>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients").finish_non_exhaustive()
    }
}

impl Clients {
    /// The three clients from one configuration, each with `qps`/`burst` of its own.
    pub fn build(
        config: Config,
        qps: f32,
        burst: i32,
        renew_deadline: Duration,
    ) -> Result<Self, RunError> {
        let mut lease_config = config.clone();
        lease_config.connect_timeout = Some(renew_deadline);
        let counts = Arc::new(RequestCounts::default());
        counts.set_host(
            config
                .cluster_url
                .authority()
                .map(ToString::to_string)
                .unwrap_or_default(),
        );
        Ok(Self {
            main: build_client_on(
                config.clone(),
                qps,
                burst,
                MAX_IN_FLIGHT,
                None,
                Some(&counts),
            )?,
            events: build_client_on(
                config,
                qps,
                burst,
                EVENTS_MAX_IN_FLIGHT,
                None,
                Some(&counts),
            )?,
            lease: build_client_on(
                lease_config,
                qps,
                burst,
                LEASE_MAX_IN_FLIGHT,
                Some(renew_deadline),
                Some(&counts),
            )?,
            counts,
        })
    }

    /// One client for everything (tests that build their own).
    pub fn shared(client: Client) -> Self {
        Self {
            main: client.clone(),
            events: client.clone(),
            lease: client,
            counts: Arc::new(RequestCounts::default()),
        }
    }
}
