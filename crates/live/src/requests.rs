//! Counts of the API requests a scheduler's clients send, by verb and resource (as the API
//! server's audit log and RBAC name them: `create pods/binding`, `list nodes`, `watch
//! pods`) and by HTTP method and status code (client-go's `rest_client_requests_total`
//! labels). A tower layer over each client does the counting; `kubesched bench
//! --kubeconfig` reads the counts to report requests per scheduled pod, and `/metrics`
//! shows them as client-go's `rest_client_requests_total{code,host,method}`,
//! `rest_client_request_duration_seconds{host,verb}` (until the answer's headers, as
//! client-go times it) and `rest_client_rate_limiter_duration_seconds{host,verb}` (the wait
//! for a token of the client's own qps/burst limit).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

// tokio's clock, so that tests on paused time see the rate limiter's waits.
use tokio::time::Instant;

use parking_lot::Mutex;
use tower_layer::Layer;
use tower_service::Service;

/// What one request was, in API terms.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKind {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// or the lower-case HTTP method for a path outside the resource API.
    pub verb: String,
    /// `pods`, `pods/binding`, `events.k8s.io/events`, ... (the group prefixes a resource
    /// outside the core group); the path for a non-resource request (`/version`).
    pub resource: String,
}

/// client-go's buckets for both of its latency histograms, in seconds.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// One series of a latency histogram over [`LATENCY_BUCKETS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyHistogram {
    /// Observations per bucket (not cumulative); the last slot is above the last bound.
    counts: [u64; LATENCY_BUCKETS.len() + 1],
    sum: f64,
}

impl LatencyHistogram {
    fn observe(&mut self, took: Duration) {
        let seconds = took.as_secs_f64();
        let at = LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.counts[at] += 1;
        self.sum += seconds;
    }

    /// How many observations there were.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The sum of the observations, in seconds.
    pub fn sum(&self) -> f64 {
        self.sum
    }

    fn write(&self, out: &mut String, family: &str, labels: &str) {
        use std::fmt::Write as _;
        let mut cumulative = 0;
        for (bound, n) in LATENCY_BUCKETS.iter().zip(self.counts) {
            cumulative += n;
            let _ = writeln!(
                out,
                "{family}_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
            );
        }
        let count = self.count();
        let _ = writeln!(out, "{family}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{family}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{family}_count{{{labels}}} {count}");
    }
}

/// Counters shared by the clients of one scheduler.
#[derive(Debug, Default)]
pub struct RequestCounts {
    by_kind: Mutex<BTreeMap<RequestKind, u64>>,
    by_code: Mutex<BTreeMap<(String, String), u64>>,
    /// Latency until the answer, by HTTP method.
    latency: Mutex<BTreeMap<String, LatencyHistogram>>,
    /// The wait for a rate-limiter token, by HTTP method.
    throttled: Mutex<BTreeMap<String, LatencyHistogram>>,
    host: Mutex<String>,
}

impl RequestCounts {
    /// Counts of every request so far, by verb and resource.
    pub fn by_kind(&self) -> BTreeMap<RequestKind, u64> {
        self.by_kind.lock().clone()
    }

    /// Counts by HTTP method and status code (`<error>` when no response came).
    pub fn by_code(&self) -> BTreeMap<(String, String), u64> {
        self.by_code.lock().clone()
    }

    /// The API server's `host:port` the clients talk to.
    pub fn host(&self) -> String {
        self.host.lock().clone()
    }

    pub(crate) fn set_host(&self, host: String) {
        *self.host.lock() = host;
    }

    fn sent(&self, kind: RequestKind) {
        *self.by_kind.lock().entry(kind).or_default() += 1;
    }

    /// Request latency by HTTP method (`rest_client_request_duration_seconds`).
    pub fn latency(&self) -> BTreeMap<String, LatencyHistogram> {
        self.latency.lock().clone()
    }

    /// Rate-limiter waits by HTTP method (`rest_client_rate_limiter_duration_seconds`).
    pub fn rate_limiter_waits(&self) -> BTreeMap<String, LatencyHistogram> {
        self.throttled.lock().clone()
    }

    fn waited_for_token(&self, method: &http::Method, waited: Duration) {
        self.throttled
            .lock()
            .entry(method.as_str().to_string())
            .or_default()
            .observe(waited);
    }

    fn answered(&self, method: &http::Method, code: Option<u16>, took: Duration) {
        self.latency
            .lock()
            .entry(method.as_str().to_string())
            .or_default()
            .observe(took);
        let code = code.map_or_else(|| "<error>".to_string(), |c| c.to_string());
        *self
            .by_code
            .lock()
            .entry((method.as_str().to_string(), code))
            .or_default() += 1;
    }

    /// client-go's three client families in Prometheus text format, or in OpenMetrics text
    /// when `openmetrics` (which names a counter family without `_total`); empty when
    /// nothing was sent.
    pub fn metrics_text(&self, openmetrics: bool) -> String {
        use std::fmt::Write as _;
        let by_code = self.by_code();
        if by_code.is_empty() {
            return String::new();
        }
        let host = self.host();
        let family = if openmetrics {
            "rest_client_requests"
        } else {
            "rest_client_requests_total"
        };
        let mut out = format!(
            "# HELP {family} Number of HTTP requests, partitioned by status code, method, and host.\n# TYPE {family} counter\n"
        );
        for ((method, code), n) in by_code {
            let _ = writeln!(
                out,
                "rest_client_requests_total{{code=\"{code}\",host=\"{host}\",method=\"{method}\"}} {n}"
            );
        }
        for (family, help, series) in [
            (
                "rest_client_request_duration_seconds",
                "Request latency in seconds. Broken down by verb, and host.",
                self.latency(),
            ),
            (
                "rest_client_rate_limiter_duration_seconds",
                "Client side rate limiter latency in seconds. Broken down by verb, and host.",
                self.rate_limiter_waits(),
            ),
        ] {
            if series.is_empty() {
                continue;
            }
            let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} histogram");
            for (verb, histogram) in series {
                histogram.write(
                    &mut out,
                    family,
                    &format!("host=\"{host}\",verb=\"{verb}\""),
                );
            }
        }
        out
    }
}

/// The verb and resource of a request to `path` (without the server's base) with `query`.
pub fn classify(method: &http::Method, path: &str, query: Option<&str>) -> RequestKind {
    let other = || RequestKind {
        verb: method.as_str().to_ascii_lowercase(),
        resource: path.to_string(),
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... or /apis/GROUP/VERSION/...
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return other(),
    };
    let rest = match rest {
        ["namespaces", _ns, tail @ ..] if !tail.is_empty() => tail,
        r => r,
    };
    let (resource, name, sub) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
        [] => return other(),
    };
    let watch = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match (method.as_str(), name.is_some()) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return other(),
    };
    let mut full = String::new();
    if !group.is_empty() {
        full.push_str(group);
        full.push('/');
    }
    full.push_str(resource);
    if let Some(sub) = sub {
        full.push('/');
        full.push_str(sub);
    }
    RequestKind {
        verb: verb.to_string(),
        resource: full,
    }
}

/// A tower layer that counts every request into [`RequestCounts`].
#[derive(Debug, Clone)]
pub struct CountLayer {
    counts: Arc<RequestCounts>,
}

impl CountLayer {
    /// A layer counting into `counts`.
    pub fn new(counts: Arc<RequestCounts>) -> Self {
        Self { counts }
    }
}

impl<S> Layer<S> for CountLayer {
    type Service = Count<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Count {
            inner,
            counts: self.counts.clone(),
            asked_ready_at: None,
            waited: Duration::ZERO,
        }
    }
}

/// The service of [`CountLayer`].
#[derive(Debug, Clone)]
pub struct Count<S> {
    inner: S,
    counts: Arc<RequestCounts>,
    /// When readiness was first asked for the next request: the rate limiter below makes
    /// `poll_ready` wait for its token, so the time until ready is that wait.
    asked_ready_at: Option<Instant>,
    /// The wait of the request that is ready to be sent.
    waited: Duration,
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for Count<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let asked = *self.asked_ready_at.get_or_insert_with(Instant::now);
        let ready = self.inner.poll_ready(cx);
        if ready.is_ready() {
            self.waited = asked.elapsed();
            self.asked_ready_at = None;
        }
        ready
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let method = req.method().clone();
        self.counts
            .sent(classify(&method, req.uri().path(), req.uri().query()));
        self.counts
            .waited_for_token(&method, std::mem::take(&mut self.waited));
        let counts = self.counts.clone();
        let sent_at = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let result = fut.await;
            counts.answered(
                &method,
                result.as_ref().ok().map(|r| r.status().as_u16()),
                sent_at.elapsed(),
            );
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn kind(method: Method, path: &str, query: Option<&str>) -> (String, String) {
        let k = classify(&method, path, query);
        (k.verb, k.resource)
    }

    fn pair(verb: &str, resource: &str) -> (String, String) {
        (verb.to_string(), resource.to_string())
    }

    #[test]
    fn requests_are_named_as_the_api_server_names_them() {
        let cases = [
            (
                Method::POST,
                "/api/v1/namespaces/ns/pods/p/binding",
                None,
                pair("create", "pods/binding"),
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/ns/pods/p/status",
                None,
                pair("patch", "pods/status"),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("fieldSelector=x&limit=500"),
                pair("list", "pods"),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("watch=true&resourceVersion=5"),
                pair("watch", "pods"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns/pods/p",
                None,
                pair("get", "pods"),
            ),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/ns/events",
                None,
                pair("create", "events.k8s.io/events"),
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
                None,
                pair("update", "coordination.k8s.io/leases"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns/pods/p",
                None,
                pair("delete", "pods"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                None,
                pair("list", "namespaces"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns",
                None,
                pair("get", "namespaces"),
            ),
            (Method::GET, "/version", None, pair("get", "/version")),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(kind(method, path, query), want, "{path}");
        }
    }

    #[tokio::test]
    async fn the_layer_counts_each_request_and_its_answer() {
        let counts = Arc::new(RequestCounts::default());
        counts.set_host("127.0.0.1:6443".into());
        let svc = tower::service_fn(|req: http::Request<()>| async move {
            let code = if req.uri().path().ends_with("/binding") {
                201
            } else {
                409
            };
            let mut resp = http::Response::new(());
            *resp.status_mut() = http::StatusCode::from_u16(code).expect("code");
            Ok::<_, std::convert::Infallible>(resp)
        });
        let mut counted = CountLayer::new(counts.clone()).layer(svc);
        for path in [
            "/api/v1/namespaces/a/pods/p/binding",
            "/api/v1/namespaces/a/pods/q/binding",
            "/api/v1/namespaces/a/pods",
        ] {
            let req = http::Request::post(path).body(()).expect("request");
            counted.call(req).await.expect("answer");
        }
        let by_kind = counts.by_kind();
        let binding = RequestKind {
            verb: "create".into(),
            resource: "pods/binding".into(),
        };
        assert_eq!(by_kind.get(&binding), Some(&2));
        assert_eq!(by_kind.values().sum::<u64>(), 3);
        let text = counts.metrics_text(false);
        assert!(
            counts
                .metrics_text(true)
                .contains("# TYPE rest_client_requests counter\n")
        );
        assert!(
            text.contains(
                "rest_client_requests_total{code=\"201\",host=\"127.0.0.1:6443\",method=\"POST\"} 2"
            ),
            "{text}"
        );
        assert!(text.contains("code=\"409\""), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn latency_and_the_rate_limiters_wait_are_observed_by_verb() {
        use crate::ratelimit::{RateLimitLayer, TokenBucket};
        let counts = Arc::new(RequestCounts::default());
        counts.set_host("10.0.0.1:6443".into());
        let svc = tower::service_fn(|_req: http::Request<()>| async move {
            // Paused time: the answer takes 30 ms of the test's clock, not of the machine's.
            tokio::time::advance(Duration::from_millis(30)).await;
            Ok::<_, std::convert::Infallible>(http::Response::new(()))
        });
        // As the clients stack them: the counting layer outside the rate limiter.
        let limited = RateLimitLayer::new(TokenBucket::new(2.0, 1)).layer(svc);
        let mut counted = CountLayer::new(counts.clone()).layer(limited);
        for _ in 0..3 {
            std::future::poll_fn(|cx| counted.poll_ready(cx))
                .await
                .expect("ready");
            let req = http::Request::get("/api/v1/nodes")
                .body(())
                .expect("request");
            counted.call(req).await.expect("answer");
        }
        let latency = counts.latency();
        let get = latency.get("GET").expect("GET latency");
        assert_eq!(get.count(), 3);
        assert!((get.sum() - 0.09).abs() < 0.005, "{}", get.sum());
        // One token at once, then one every half second: 0 + 0.5 + 1.0 s of waiting.
        let waits = counts.rate_limiter_waits();
        let get = waits.get("GET").expect("GET waits");
        assert_eq!(get.count(), 3);
        assert!(get.sum() >= 1.45, "{}", get.sum());
        let text = counts.metrics_text(false);
        for line in [
            "# TYPE rest_client_request_duration_seconds histogram",
            "rest_client_request_duration_seconds_bucket{host=\"10.0.0.1:6443\",verb=\"GET\",le=\"0.005\"} 0",
            "rest_client_request_duration_seconds_bucket{host=\"10.0.0.1:6443\",verb=\"GET\",le=\"0.1\"} 3",
            "rest_client_request_duration_seconds_count{host=\"10.0.0.1:6443\",verb=\"GET\"} 3",
            "# TYPE rest_client_rate_limiter_duration_seconds histogram",
            "rest_client_rate_limiter_duration_seconds_bucket{host=\"10.0.0.1:6443\",verb=\"GET\",le=\"0.005\"} 1",
            "rest_client_rate_limiter_duration_seconds_bucket{host=\"10.0.0.1:6443\",verb=\"GET\",le=\"+Inf\"} 3",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
    }
}
