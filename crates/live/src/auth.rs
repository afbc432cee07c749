//! Delegated authentication and authorization of the secure port, as kube-scheduler does
//! it with k8s.io/apiserver's delegating options: a client certificate signed by
//! `--client-ca-file` names the user (CN) and groups (O); a bearer token is checked with a
//! TokenReview; a request with neither is `system:anonymous` (when anonymous access is on,
//! the default) or refused with 401. The user is then authorised for the non-resource path
//! and verb (`get /metrics`) by a SubjectAccessReview, unless the path is one of the
//! always-allowed ones (`/healthz`, `/readyz`, `/livez` by default) or the user is in an
//! always-allowed group (`system:masters`); a refusal is 403. Answers are cached as
//! upstream caches them: token reviews for 10 s, allowed and denied decisions for 10 s each.
//! The review clients are their own kube clients (from `--authentication-kubeconfig` /
//! `--authorization-kubeconfig`, else the in-cluster configuration), never the scheduler's.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use parking_lot::Mutex;

use crate::auth_sources::{AuthnSources, RequestHeaderConfig, RequestHeaderOptions};
use crate::error::RunError;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;

/// Paths served to anyone by default (upstream's `--authorization-always-allow-paths`).
pub const DEFAULT_ALWAYS_ALLOW_PATHS: &[&str] = &["/healthz", "/readyz", "/livez"];
/// Groups allowed everything without a review (upstream's privileged group).
pub const DEFAULT_ALWAYS_ALLOW_GROUPS: &[&str] = &["system:masters"];
/// The user of a request without credentials.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of a request without credentials.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group every authenticated user gets.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Upstream's cache TTL of token reviews.
pub const DEFAULT_AUTHN_CACHE_TTL: Duration = Duration::from_secs(10);
/// Upstream's cache TTL of allowed decisions.
pub const DEFAULT_AUTHZ_ALLOWED_TTL: Duration = Duration::from_secs(10);
/// Upstream's cache TTL of denied decisions.
pub const DEFAULT_AUTHZ_DENIED_TTL: Duration = Duration::from_secs(10);
/// Upstream's timeout of a review request.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// The review clients' rate limit (upstream's delegating clients: 200 qps, burst 400).
const REVIEW_QPS: f32 = 200.0;
const REVIEW_BURST: i32 = 400;

/// How requests to the endpoints are authenticated and authorised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegatedAuth {
    /// Where TokenReviews go (`--authentication-kubeconfig`); None: in-cluster.
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Where SubjectAccessReviews go (`--authorization-kubeconfig`); None: in-cluster.
    pub authorization_kubeconfig: Option<PathBuf>,
    /// CA bundle that client certificates must chain to (`--client-ca-file`).
    pub client_ca_file: Option<PathBuf>,
    /// Paths authorised without a review; a trailing `*` matches any suffix.
    pub always_allow_paths: Vec<String>,
    /// Groups authorised without a review.
    pub always_allow_groups: Vec<String>,
    /// Whether a request without credentials is `system:anonymous` (true) or refused (false).
    pub anonymous: bool,
    /// How long a token review answer is reused.
    pub authn_cache_ttl: Duration,
    /// How long an allowed decision is reused.
    pub authz_allowed_ttl: Duration,
    /// How long a denied decision is reused.
    pub authz_denied_ttl: Duration,
    /// The front-proxy authenticator's flags (`--requestheader-*`).
    pub request_header: RequestHeaderOptions,
    /// Do not look up what the flags leave unset in the extension-apiserver-authentication
    /// ConfigMap (`--authentication-skip-lookup`).
    pub skip_lookup: bool,
    /// Go on without it when that lookup fails (`--authentication-tolerate-lookup-failure`).
    pub tolerate_lookup_failure: bool,
}

impl Default for DelegatedAuth {
    fn default() -> Self {
        Self {
            authentication_kubeconfig: None,
            authorization_kubeconfig: None,
            client_ca_file: None,
            always_allow_paths: DEFAULT_ALWAYS_ALLOW_PATHS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            always_allow_groups: DEFAULT_ALWAYS_ALLOW_GROUPS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            anonymous: true,
            authn_cache_ttl: DEFAULT_AUTHN_CACHE_TTL,
            authz_allowed_ttl: DEFAULT_AUTHZ_ALLOWED_TTL,
            authz_denied_ttl: DEFAULT_AUTHZ_DENIED_TTL,
            request_header: RequestHeaderOptions::default(),
            skip_lookup: false,
            tolerate_lookup_failure: true,
        }
    }
}

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// UID, when the authenticator gave one.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    fn anonymous() -> Self {
        Self {
            name: ANONYMOUS_USER.into(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED_GROUP.into()],
            extra: BTreeMap::new(),
        }
    }

    fn with_authenticated_group(mut self) -> Self {
        if !self.groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            self.groups.push(AUTHENTICATED_GROUP.into());
        }
        self
    }
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthnError {
    /// No credentials, and anonymous requests are not allowed.
    #[error("no credentials")]
    NoCredentials,
    /// The token was reviewed and refused.
    #[error("token refused: {0}")]
    Refused(String),
    /// The token could not be reviewed (no authentication client, or the review failed).
    #[error("token review failed: {0}")]
    ReviewFailed(String),
}

/// Counters of the reviews sent (not answered from the cache).
#[derive(Debug, Default)]
pub struct ReviewCounts {
    /// TokenReviews sent.
    pub token_reviews: AtomicU64,
    /// SubjectAccessReviews sent.
    pub access_reviews: AtomicU64,
}

type DecisionKey = (UserInfo, String, String);

/// Upstream's bound on cached authorization decisions (an LRU of 8192); the token cache
/// keeps the same bound, so requests with ever new tokens or paths cannot grow memory.
pub const ANSWER_CACHE_CAPACITY: usize = 8192;

/// Review answers kept for their time to live, at most `capacity` of them: when a new
/// answer finds the cache full, the expired answers leave first, then the oldest one.
struct AnswerCache<K, V> {
    capacity: usize,
    answers: HashMap<K, (Instant, V)>,
}

impl<K: Eq + std::hash::Hash + Clone, V: Clone> AnswerCache<K, V> {
    fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            answers: HashMap::new(),
        }
    }

    /// The answer for `key`, unless it is older than the `ttl` it gets.
    fn get(&self, key: &K, now: Instant, ttl: impl Fn(&V) -> Duration) -> Option<V> {
        let (at, answer) = self.answers.get(key)?;
        (now.saturating_duration_since(*at) < ttl(answer)).then(|| answer.clone())
    }

    fn insert(&mut self, key: K, now: Instant, answer: V, ttl: impl Fn(&V) -> Duration) {
        if self.answers.len() >= self.capacity && !self.answers.contains_key(&key) {
            self.answers
                .retain(|_, (at, v)| now.saturating_duration_since(*at) < ttl(v));
            if self.answers.len() >= self.capacity {
                let oldest = self
                    .answers
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    self.answers.remove(&k);
                }
            }
        }
        self.answers.insert(key, (now, answer));
    }
}

/// The authenticator and authorizer of the endpoints.
pub struct Gatekeeper {
    options: DelegatedAuth,
    /// The CAs and front-proxy settings in effect (flags, then the ConfigMap).
    sources: AuthnSources,
    /// Verifies client certificates against the client CA (`None`: no such CA).
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
    /// Verifies front proxies' certificates against the request-header CA.
    proxy_verifier: Option<Arc<dyn ClientCertVerifier>>,
    token_reviews: Option<Api<TokenReview>>,
    access_reviews: Option<Api<SubjectAccessReview>>,
    /// Token reviews' answers: the user, or why not.
    tokens: Mutex<AnswerCache<[u8; 32], Result<UserInfo, String>>>,
    /// Authorization decisions: Ok, or the reason for a denial.
    decisions: Mutex<AnswerCache<DecisionKey, Result<(), String>>>,
    /// What was sent to the API server.
    pub counts: ReviewCounts,
}

impl std::fmt::Debug for Gatekeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gatekeeper")
            .field("options", &self.options)
            .field("token_reviews", &self.token_reviews.is_some())
            .field("access_reviews", &self.access_reviews.is_some())
            .finish_non_exhaustive()
    }
}

async fn review_client(path: Option<&std::path::Path>, what: &str) -> Option<Client> {
    let config = match path {
        Some(p) => match crate::connect::client_config(Some(p)).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "loading the {what} kubeconfig");
                return None;
            }
        },
        None => match kube::Config::incluster() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "no {what} kubeconfig given and not in a cluster, so {what} reviews will not work");
                return None;
            }
        },
    };
    match crate::connect::build_client(config, REVIEW_QPS, REVIEW_BURST) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::error!(error = %e, "building the {what} client");
            None
        }
    }
}

impl Gatekeeper {
    /// Builds the review clients from the options. A missing kubeconfig outside a cluster
    /// is not an error (as upstream, where they are optional): tokens are then refused and
    /// only always-allowed paths and groups get through.
    ///
    /// The client CA and the front-proxy settings the flags leave unset are looked up in
    /// the extension-apiserver-authentication ConfigMap through the authentication client
    /// (see [`crate::auth_sources`]).
    pub async fn new(options: DelegatedAuth) -> Result<Self, RunError> {
        let authn = review_client(
            options.authentication_kubeconfig.as_deref(),
            "authentication",
        )
        .await;
        let authz =
            review_client(options.authorization_kubeconfig.as_deref(), "authorization").await;
        let sources = AuthnSources::resolve(
            options.client_ca_file.as_deref(),
            &options.request_header,
            options.skip_lookup,
            options.tolerate_lookup_failure,
            authn.as_ref(),
        )
        .await?;
        Self::with_sources(options, authn, authz, sources)
    }

    /// A gatekeeper reviewing through these clients, with the CAs of the options' files
    /// only (no lookup).
    pub fn with_clients(
        options: DelegatedAuth,
        authn: Option<Client>,
        authz: Option<Client>,
    ) -> Result<Self, RunError> {
        let sources =
            AuthnSources::from_files(options.client_ca_file.as_deref(), &options.request_header)?;
        Self::with_sources(options, authn, authz, sources)
    }

    /// A gatekeeper with these clients and these CAs.
    pub fn with_sources(
        options: DelegatedAuth,
        authn: Option<Client>,
        authz: Option<Client>,
        sources: AuthnSources,
    ) -> Result<Self, RunError> {
        let client_verifier = verifier(&sources.client_ca, &sources.client_ca_source)?;
        let proxy_verifier = match &sources.request_header {
            Some(rh) => verifier(&rh.ca, &rh.source)?,
            None => None,
        };
        if !sources.client_ca.is_empty() {
            tracing::info!(source = %sources.client_ca_source, "client certificates authenticate");
        }
        if let Some(rh) = &sources.request_header {
            tracing::info!(source = %rh.source, "front-proxy request headers authenticate");
        }
        Ok(Self {
            options,
            sources,
            client_verifier,
            proxy_verifier,
            token_reviews: authn.map(Api::all),
            access_reviews: authz.map(Api::all),
            tokens: Mutex::new(AnswerCache::new(ANSWER_CACHE_CAPACITY)),
            decisions: Mutex::new(AnswerCache::new(ANSWER_CACHE_CAPACITY)),
            counts: ReviewCounts::default(),
        })
    }

    /// The CAs and front-proxy settings in effect.
    pub fn sources(&self) -> &AuthnSources {
        &self.sources
    }

    /// The options.
    pub fn options(&self) -> &DelegatedAuth {
        &self.options
    }

    /// Who presented this token (TokenReview, cached).
    pub async fn review_token(&self, token: &str) -> Result<UserInfo, AuthnError> {
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        let now = Instant::now();
        let ttl = self.options.authn_cache_ttl;
        if let Some(answer) = self.tokens.lock().get(&key, now, |_| ttl) {
            return answer.map_err(AuthnError::Refused);
        }
        let Some(api) = &self.token_reviews else {
            return Err(AuthnError::ReviewFailed(
                "no authentication kubeconfig".into(),
            ));
        };
        self.counts.token_reviews.fetch_add(1, Ordering::Relaxed);
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                ..Default::default()
            },
            ..Default::default()
        };
        let reply = post_review(api, &review)
            .await
            .map_err(AuthnError::ReviewFailed)?;
        let status = reply.status.unwrap_or_default();
        let answer = match (status.authenticated, status.user) {
            (Some(true), Some(u)) => Ok(UserInfo {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default(),
            }
            .with_authenticated_group()),
            _ => Err(status
                .error
                .unwrap_or_else(|| "token not authenticated".into())),
        };
        self.tokens.lock().insert(key, now, answer.clone(), |_| ttl);
        answer.map_err(AuthnError::Refused)
    }

    /// Who made the request, as upstream's delegated authenticator asks: a front proxy's
    /// certificate with the user in its request headers, a client certificate, a bearer
    /// token; the first that knows the user wins. When none does and one of them failed
    /// (a certificate no CA of its kind signed, a proxy name not allowed, a refused token)
    /// the request is refused, else it is anonymous (when allowed).
    ///
    /// `chain` is the verified peer chain, end entity first (the TLS layer accepts any of
    /// [`AuthnSources::all_roots`]; here it is checked against each kind's own CA).
    pub async fn authenticate(
        &self,
        chain: &[Vec<u8>],
        headers: &HeaderMap,
    ) -> Result<UserInfo, AuthnError> {
        let mut failures = Vec::new();
        if let Some((end, intermediates)) = chain.split_first() {
            let end = CertificateDer::from(end.as_slice());
            let intermediates: Vec<CertificateDer<'_>> = intermediates
                .iter()
                .map(|c| CertificateDer::from(c.as_slice()))
                .collect();
            if let (Some(v), Some(rh)) = (&self.proxy_verifier, &self.sources.request_header) {
                match verified(v.as_ref(), &end, &intermediates) {
                    Err(e) => {
                        failures.push(format!("verifying the front proxy's certificate: {e}"))
                    }
                    Ok(()) => match proxy_user(rh, end.as_ref(), headers) {
                        Ok(Some(user)) => return Ok(user.with_authenticated_group()),
                        Ok(None) => {}
                        Err(e) => failures.push(e),
                    },
                }
            }
            if let Some(v) = &self.client_verifier {
                match verified(v.as_ref(), &end, &intermediates) {
                    Err(e) => failures.push(format!("verifying the client certificate: {e}")),
                    Ok(()) => {
                        if let Some(user) = user_of_certificate(end.as_ref()) {
                            return Ok(user.with_authenticated_group());
                        }
                    }
                }
            }
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.trim().split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| rest.trim())
                    .filter(|t| !t.is_empty())
            });
        match token {
            Some(t) => match self.review_token(t).await {
                Ok(user) => Ok(user),
                Err(e) if failures.is_empty() => Err(e),
                Err(e) => {
                    failures.push(e.to_string());
                    Err(AuthnError::Refused(failures.join("; ")))
                }
            },
            None if !failures.is_empty() => Err(AuthnError::Refused(failures.join("; "))),
            None if self.options.anonymous => Ok(UserInfo::anonymous()),
            None => Err(AuthnError::NoCredentials),
        }
    }

    fn always_allowed_path(&self, path: &str) -> bool {
        self.options
            .always_allow_paths
            .iter()
            .any(|p| match p.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => p == path,
            })
    }

    /// Whether `user` may `verb` the non-resource `path`: Ok, or the reason it may not.
    pub async fn authorize(&self, user: &UserInfo, verb: &str, path: &str) -> Result<(), String> {
        if self.always_allowed_path(path)
            || user
                .groups
                .iter()
                .any(|g| self.options.always_allow_groups.contains(g))
        {
            return Ok(());
        }
        let key = (user.clone(), verb.to_string(), path.to_string());
        let now = Instant::now();
        let (allowed_ttl, denied_ttl) = (
            self.options.authz_allowed_ttl,
            self.options.authz_denied_ttl,
        );
        let ttl = move |answer: &Result<(), String>| {
            if answer.is_ok() {
                allowed_ttl
            } else {
                denied_ttl
            }
        };
        if let Some(answer) = self.decisions.lock().get(&key, now, ttl) {
            return answer;
        }
        let Some(api) = &self.access_reviews else {
            return Err(String::new());
        };
        self.counts.access_reviews.fetch_add(1, Ordering::Relaxed);
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                user: Some(user.name.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reply = match post_review(api, &review).await {
            Ok(r) => r,
            // Not cached: the next request asks again.
            Err(e) => {
                tracing::warn!(error = %e, "SubjectAccessReview failed");
                return Err(String::new());
            }
        };
        let status = reply.status.unwrap_or_default();
        let answer = if status.allowed && status.denied != Some(true) {
            Ok(())
        } else {
            Err(status.reason.unwrap_or_default())
        };
        self.decisions.lock().insert(key, now, answer.clone(), ttl);
        answer
    }
}

/// Posts a review (TokenReview, SubjectAccessReview) and waits at most [`REVIEW_TIMEOUT`]
/// for the answer; the error in words (the API's, or "timed out").
async fn post_review<K>(api: &Api<K>, review: &K) -> Result<K, String>
where
    K: Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), review)).await {
        Ok(reply) => reply.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

/// The user named by a client certificate: CN is the name, each O a group.
pub fn user_of_certificate(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(UserInfo {
        name,
        uid: String::new(),
        groups,
        extra: BTreeMap::new(),
    })
}

/// A verifier of certificates chaining to `roots` (None when there are none).
fn verifier(
    roots: &[CertificateDer<'static>],
    source: &str,
) -> Result<Option<Arc<dyn ClientCertVerifier>>, RunError> {
    if roots.is_empty() {
        return Ok(None);
    }
    let mut store = rustls::RootCertStore::empty();
    for c in roots {
        store
            .add(c.clone())
            .map_err(|e| RunError::Serving(format!("{source}: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider)
        .build()
        .map(Some)
        .map_err(|e| RunError::Serving(format!("{source}: {e}")))
}

fn verified(
    v: &dyn ClientCertVerifier,
    end: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
) -> Result<(), String> {
    v.verify_client_cert(end, intermediates, UnixTime::now())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The user a verified front proxy names in its headers (None: no user header set, so
/// this authenticator does not know the request), after its common name is checked.
fn proxy_user(
    rh: &RequestHeaderConfig,
    end_der: &[u8],
    headers: &HeaderMap,
) -> Result<Option<UserInfo>, String> {
    if !rh.allowed_names.is_empty() {
        let cn = user_of_certificate(end_der)
            .map(|u| u.name)
            .unwrap_or_default();
        if !rh.allowed_names.contains(&cn) {
            return Err(format!(
                "x509: subject with cn={cn} is not in the allowed list"
            ));
        }
    }
    let first = |names: &[String]| {
        names
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .flat_map(|n| headers.get_all(n).iter())
            .filter_map(|v| v.to_str().ok())
            .find(|v| !v.is_empty())
            .map(str::to_string)
    };
    let Some(name) = first(&rh.username_headers) else {
        return Ok(None);
    };
    let groups = rh
        .group_headers
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .flat_map(|n| headers.get_all(n).iter())
        .filter_map(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (header_name, value) in headers {
        let lower = header_name.as_str().to_ascii_lowercase();
        let Some(key) = rh
            .extra_headers_prefixes
            .iter()
            .map(|p| p.trim().to_ascii_lowercase())
            .filter(|p| !p.is_empty())
            .find_map(|p| lower.strip_prefix(p.as_str()).map(str::to_string))
        else {
            continue;
        };
        if let Ok(v) = value.to_str() {
            extra
                .entry(percent_decode(&key))
                .or_default()
                .push(v.to_string());
        }
    }
    Ok(Some(UserInfo {
        name,
        uid: first(&rh.uid_headers).unwrap_or_default(),
        groups,
        extra,
    }))
}

/// `%XX` escapes decoded (extra keys are escaped by the proxy: `X-Remote-Extra-Acme.com%2Fproject`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn status_response(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": {}, "code": code.as_u16(),
    });
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The axum middleware: authenticates, authorises, then lets the request through.
pub async fn guard(
    State(gate): State<Arc<Gatekeeper>>,
    req: Request<Body>,
    next: Next,
) -> Response {
    let chain = req
        .extensions()
        .get::<Arc<axum_server::tls::TlsInfo>>()
        .map(|info| info.peer_certificates.clone())
        .unwrap_or_default();
    let user = match gate.authenticate(&chain, req.headers()).await {
        Ok(u) => u,
        Err(e) => {
            tracing::debug!(path = %req.uri().path(), error = %e, "unauthenticated request");
            return status_response(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
    };
    let verb = req.method().as_str().to_ascii_lowercase();
    let path = req.uri().path().to_string();
    if let Err(reason) = gate.authorize(&user, &verb, &path).await {
        let mut message = format!(
            "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
            user.name
        );
        if !reason.is_empty() {
            message.push_str(&format!(": {reason}"));
        }
        tracing::debug!(user = %user.name, %verb, %path, "forbidden");
        return status_response(StatusCode::FORBIDDEN, "Forbidden", &message);
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_cache_keeps_fresh_answers_and_a_bound() {
        let ttl = |_: &u32| Duration::from_secs(10);
        let t0 = Instant::now();
        let mut cache = AnswerCache::new(3);
        cache.insert("a", t0, 1, ttl);
        assert_eq!(cache.get(&"a", t0 + Duration::from_secs(9), ttl), Some(1));
        assert_eq!(cache.get(&"a", t0 + Duration::from_secs(10), ttl), None);
        // Ever new keys never grow it past the bound: the oldest leaves.
        for (i, k) in ["b", "c", "d", "e"].into_iter().enumerate() {
            cache.insert(k, t0 + Duration::from_secs(i as u64 + 1), 2, ttl);
            assert!(cache.answers.len() <= 3);
        }
        assert_eq!(cache.get(&"a", t0 + Duration::from_secs(5), ttl), None);
        assert_eq!(cache.get(&"b", t0 + Duration::from_secs(5), ttl), None);
        assert_eq!(cache.get(&"e", t0 + Duration::from_secs(5), ttl), Some(2));
        // When full, the expired leave first, however many.
        let later = t0 + Duration::from_secs(13);
        cache.insert("f", later, 3, ttl);
        assert_eq!(cache.answers.len(), 2, "c and d expired");
        assert_eq!(cache.get(&"e", later, ttl), Some(2));
        assert_eq!(cache.get(&"f", later, ttl), Some(3));
        // Replacing a key's answer needs no room.
        cache.insert("g", later, 4, ttl);
        cache.insert("g", later, 5, ttl);
        assert_eq!(cache.answers.len(), 3);
        assert_eq!(cache.get(&"g", later, ttl), Some(5));
    }

    fn gate(options: DelegatedAuth) -> Gatekeeper {
        Gatekeeper::with_clients(options, None, None).expect("gatekeeper")
    }

    fn no_headers() -> HeaderMap {
        HeaderMap::new()
    }

    #[tokio::test]
    async fn without_review_clients_only_the_always_allowed_get_through() {
        let g = gate(DelegatedAuth::default());
        let anon = g.authenticate(&[], &no_headers()).await.expect("anonymous");
        assert_eq!(anon.name, ANONYMOUS_USER);
        assert_eq!(anon.groups, [UNAUTHENTICATED_GROUP]);
        for path in ["/healthz", "/readyz", "/livez"] {
            assert_eq!(g.authorize(&anon, "get", path).await, Ok(()), "{path}");
        }
        // Exact paths only: upstream's defaults do not cover /healthz/ready.
        assert!(g.authorize(&anon, "get", "/healthz/ready").await.is_err());
        assert!(g.authorize(&anon, "get", "/metrics").await.is_err());
        let admin = UserInfo {
            name: "root".into(),
            groups: vec!["system:masters".into()],
            ..UserInfo::anonymous()
        };
        assert_eq!(g.authorize(&admin, "get", "/configz").await, Ok(()));
        // A token cannot be reviewed without a client: refused, never anonymous.
        let mut bearer = HeaderMap::new();
        bearer.insert(header::AUTHORIZATION, "Bearer abc".parse().expect("header"));
        assert!(matches!(
            g.authenticate(&[], &bearer).await,
            Err(AuthnError::ReviewFailed(_))
        ));
    }

    #[tokio::test]
    async fn anonymous_off_refuses_requests_without_credentials() {
        let g = gate(DelegatedAuth {
            anonymous: false,
            always_allow_paths: vec!["/debug/*".into()],
            ..DelegatedAuth::default()
        });
        assert_eq!(
            g.authenticate(&[], &no_headers()).await,
            Err(AuthnError::NoCredentials)
        );
        let user = UserInfo::anonymous();
        assert_eq!(g.authorize(&user, "get", "/debug/pprof").await, Ok(()));
        assert!(g.authorize(&user, "get", "/healthz").await.is_err());
    }

    #[test]
    fn a_client_certificate_names_the_user_and_groups() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "prometheus");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "monitoring");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        let user = user_of_certificate(cert.der()).expect("user");
        assert_eq!(user.name, "prometheus");
        assert_eq!(user.groups, ["monitoring"]);
        assert!(user_of_certificate(b"not a certificate").is_none());
    }

    /// A CA and a certificate it signed for `cn` (DER).
    fn ca_and_leaf(cn: &str) -> (rustls::pki_types::CertificateDer<'static>, Vec<u8>) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("{cn}-ca"));
        let ca = ca_params.self_signed(&ca_key).expect("ca");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let mut leaf = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        leaf.distinguished_name.push(rcgen::DnType::CommonName, cn);
        leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let leaf_key = rcgen::KeyPair::generate().expect("key");
        let leaf = leaf.signed_by(&leaf_key, &issuer).expect("leaf");
        (ca.der().clone(), leaf.der().to_vec())
    }

    fn proxy_gate(ca: rustls::pki_types::CertificateDer<'static>, allowed: &[&str]) -> Gatekeeper {
        let sources = AuthnSources {
            request_header: Some(RequestHeaderConfig {
                ca: vec![ca],
                allowed_names: allowed.iter().map(|s| s.to_string()).collect(),
                username_headers: vec!["X-Remote-User".into()],
                uid_headers: vec!["X-Remote-Uid".into()],
                group_headers: vec!["X-Remote-Group".into()],
                extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
                source: "test".into(),
            }),
            ..AuthnSources::default()
        };
        Gatekeeper::with_sources(DelegatedAuth::default(), None, None, sources).expect("gate")
    }

    fn proxy_headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().expect("value"));
        }
        h
    }

    #[tokio::test]
    async fn a_front_proxy_names_the_user_in_its_headers() {
        let (ca, proxy) = ca_and_leaf("front-proxy-client");
        let g = proxy_gate(ca, &["front-proxy-client"]);
        let headers = proxy_headers(&[
            ("x-remote-user", "jane"),
            ("x-remote-uid", "42"),
            ("x-remote-group", "devs"),
            ("x-remote-group", "ops"),
            ("x-remote-extra-acme.com%2Fproject", "blue"),
            ("x-remote-extra-scopes", "a"),
            ("x-remote-extra-scopes", "b"),
        ]);
        let user = g
            .authenticate(std::slice::from_ref(&proxy), &headers)
            .await
            .expect("authenticated");
        assert_eq!(user.name, "jane");
        assert_eq!(user.uid, "42");
        assert_eq!(user.groups, ["devs", "ops", AUTHENTICATED_GROUP]);
        assert_eq!(user.extra["acme.com/project"], ["blue"]);
        assert_eq!(user.extra["scopes"], ["a", "b"]);
        // No user header: this authenticator does not know the request, and with no
        // other credentials and no client CA it is anonymous.
        let anon = g
            .authenticate(std::slice::from_ref(&proxy), &no_headers())
            .await
            .expect("anonymous");
        assert_eq!(anon.name, ANONYMOUS_USER);
    }

    #[tokio::test]
    async fn a_proxy_not_allowed_or_not_signed_is_refused() {
        let (ca, proxy) = ca_and_leaf("front-proxy-client");
        let headers = proxy_headers(&[("x-remote-user", "jane")]);
        let g = proxy_gate(ca.clone(), &["aggregator"]);
        assert_eq!(
            g.authenticate(std::slice::from_ref(&proxy), &headers).await,
            Err(AuthnError::Refused(
                "x509: subject with cn=front-proxy-client is not in the allowed list".into()
            ))
        );
        // A certificate some other CA signed is no proxy's.
        let (_, stranger) = ca_and_leaf("front-proxy-client");
        let g = proxy_gate(ca, &[]);
        assert!(matches!(
            g.authenticate(&[stranger], &headers).await,
            Err(AuthnError::Refused(m)) if m.starts_with("verifying the front proxy's certificate")
        ));
        // Any name when the list is empty.
        assert_eq!(
            g.authenticate(&[proxy], &headers).await.map(|u| u.name),
            Ok("jane".to_string())
        );
    }
}
