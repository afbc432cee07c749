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
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use parking_lot::Mutex;

use crate::error::RunError;

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
        Some(p) => match crate::run::client_config(Some(p)).await {
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
    match crate::run::build_client(config, REVIEW_QPS, REVIEW_BURST) {
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
    pub async fn new(options: DelegatedAuth) -> Result<Self, RunError> {
        let authn = review_client(
            options.authentication_kubeconfig.as_deref(),
            "authentication",
        )
        .await;
        let authz =
            review_client(options.authorization_kubeconfig.as_deref(), "authorization").await;
        Ok(Self::with_clients(options, authn, authz))
    }

    /// A gatekeeper reviewing through these clients.
    pub fn with_clients(
        options: DelegatedAuth,
        authn: Option<Client>,
        authz: Option<Client>,
    ) -> Self {
        Self {
            options,
            token_reviews: authn.map(Api::all),
            access_reviews: authz.map(Api::all),
            tokens: Mutex::new(AnswerCache::new(ANSWER_CACHE_CAPACITY)),
            decisions: Mutex::new(AnswerCache::new(ANSWER_CACHE_CAPACITY)),
            counts: ReviewCounts::default(),
        }
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

    /// Who made the request: a verified client certificate first, then a bearer token,
    /// then anonymous (when allowed).
    pub async fn authenticate(
        &self,
        client_cert: Option<&[u8]>,
        authorization: Option<&HeaderValue>,
    ) -> Result<UserInfo, AuthnError> {
        if let Some(user) = client_cert.and_then(user_of_certificate) {
            return Ok(user.with_authenticated_group());
        }
        let token = authorization.and_then(|v| v.to_str().ok()).and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| rest.trim())
                .filter(|t| !t.is_empty())
        });
        match token {
            Some(t) => self.review_token(t).await,
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
    let cert = req
        .extensions()
        .get::<Arc<axum_server::tls::TlsInfo>>()
        .and_then(|info| info.peer_certificates.first().cloned());
    let user = match gate
        .authenticate(cert.as_deref(), req.headers().get(header::AUTHORIZATION))
        .await
    {
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
        Gatekeeper::with_clients(options, None, None)
    }

    #[tokio::test]
    async fn without_review_clients_only_the_always_allowed_get_through() {
        let g = gate(DelegatedAuth::default());
        let anon = g.authenticate(None, None).await.expect("anonymous");
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
        let bearer = HeaderValue::from_static("Bearer abc");
        assert!(matches!(
            g.authenticate(None, Some(&bearer)).await,
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
            g.authenticate(None, None).await,
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
}
