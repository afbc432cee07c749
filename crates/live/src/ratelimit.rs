//! `clientConnection.qps` / `burst`: a token bucket in front of every API request, as
//! client-go's token bucket rate limiter (a full bucket of `burst` tokens at start, refilled
//! at `qps` per second; a request waits for its token, first come first served); and a
//! bound on the requests in flight, which bounds the TCP connections an HTTP/1.1 pool
//! opens (client-go multiplexes over one HTTP/2 connection instead).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tower_layer::Layer;
use tower_service::Service;

/// A token bucket shared by every request of one client.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket; None when `qps` is not positive (no limit, as client-go does for a
    /// negative QPS). A burst below 1 allows one request at a time.
    pub fn new(qps: f32, burst: i32) -> Option<Self> {
        if qps <= 0.0 || !qps.is_finite() {
            return None;
        }
        let burst = f64::from(burst.max(1));
        Some(Self {
            qps: f64::from(qps),
            burst,
            state: Mutex::new((burst, Instant::now())),
        })
    }

    /// Takes a token now and says how long to wait before using it (zero when one was
    /// free). Tokens taken ahead of time are owed, so waiters are served in order.
    pub fn reserve_at(&self, now: Instant) -> Duration {
        let mut st = self.state.lock();
        let (tokens, last) = *st;
        let elapsed = now.saturating_duration_since(last).as_secs_f64();
        let refilled = (tokens + elapsed * self.qps).min(self.burst);
        let left = refilled - 1.0;
        *st = (left, now.max(last));
        if left >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-left / self.qps)
        }
    }

    /// Takes a token, waiting for it when the bucket is empty.
    pub async fn acquire(&self) {
        let wait = self.reserve_at(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// A tower layer that takes a token from the bucket before each request is sent.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Option<Arc<TokenBucket>>,
}

impl RateLimitLayer {
    /// A layer around this bucket (None: no limit).
    pub fn new(bucket: Option<TokenBucket>) -> Self {
        Self {
            bucket: bucket.map(Arc::new),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            reserved: false,
        }
    }
}

/// The service of [`RateLimitLayer`]: readiness waits for a token, then for the inner
/// service. kube's client drives it from one buffer worker, so requests queue in order.
pub struct RateLimit<S> {
    inner: S,
    bucket: Option<Arc<TokenBucket>>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    reserved: bool,
}

impl<S> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("bucket", &self.bucket)
            .field("reserved", &self.reserved)
            .finish()
    }
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(bucket) = &self.bucket
            && !self.reserved
        {
            self.reserved = true;
            let wait = bucket.reserve_at(Instant::now());
            if !wait.is_zero() {
                self.wait = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
        if let Some(sleep) = self.wait.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.reserved = false;
        self.inner.call(req)
    }
}

/// A tower layer that lets at most `limit` requests use a connection at once: a request
/// holds its slot from before it takes a connection until its response body is read to
/// the end or dropped. Watches are let through without a slot (each streams on a
/// connection of its own for as long as it lasts), so a client opens at most `limit`
/// connections plus one per open watch.
#[derive(Debug, Clone)]
pub struct InFlightLayer {
    slots: Arc<tokio::sync::Semaphore>,
}

impl InFlightLayer {
    /// A layer allowing `limit` requests in flight (at least one).
    pub fn new(limit: usize) -> Self {
        Self {
            slots: Arc::new(tokio::sync::Semaphore::new(limit.max(1))),
        }
    }
}

impl<S> Layer<S> for InFlightLayer {
    type Service = InFlight<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InFlight {
            inner,
            slots: self.slots.clone(),
        }
    }
}

/// The service of [`InFlightLayer`].
#[derive(Debug, Clone)]
pub struct InFlight<S> {
    inner: S,
    slots: Arc<tokio::sync::Semaphore>,
}

fn is_watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for InFlight<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<SlotBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let slots = (!is_watch(req.uri())).then(|| self.slots.clone());
        // The inner future does nothing until polled: the connection is taken from the
        // pool only once a slot is held.
        let fut = self.inner.call(req);
        Box::pin(async move {
            let slot = match slots {
                Some(s) => s.acquire_owned().await.ok(),
                None => None,
            };
            let response = fut.await?;
            Ok(response.map(|inner| SlotBody { inner, slot }))
        })
    }
}

/// A response body that gives its request's slot back when it ends or is dropped.
#[derive(Debug)]
pub struct SlotBody<B> {
    inner: B,
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl<B> http_body::Body for SlotBody<B>
where
    B: http_body::Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.slot = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_without_positive_qps() {
        assert!(TokenBucket::new(0.0, 10).is_none());
        assert!(TokenBucket::new(-1.0, 10).is_none());
    }

    #[test]
    fn burst_then_qps() {
        let b = TokenBucket::new(10.0, 3).expect("bucket");
        let t0 = Instant::now();
        // The first `burst` requests go at once.
        for _ in 0..3 {
            assert_eq!(b.reserve_at(t0), Duration::ZERO);
        }
        // Then one every 1/qps, owed in order.
        let w1 = b.reserve_at(t0);
        let w2 = b.reserve_at(t0);
        assert!((w1.as_secs_f64() - 0.1).abs() < 1e-9, "{w1:?}");
        assert!((w2.as_secs_f64() - 0.2).abs() < 1e-9, "{w2:?}");
        // After a second of quiet the debt is paid and tokens are back (capped at burst).
        let t1 = t0 + Duration::from_secs(10);
        for _ in 0..3 {
            assert_eq!(b.reserve_at(t1), Duration::ZERO);
        }
        assert!(b.reserve_at(t1) > Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn layer_delays_requests_beyond_the_burst() {
        use std::convert::Infallible;
        let svc = tower_service_fn(|x: u32| async move { Ok::<_, Infallible>(x) });
        let mut limited = RateLimitLayer::new(TokenBucket::new(2.0, 1)).layer(svc);
        let start = tokio::time::Instant::now();
        for i in 0..3u32 {
            std::future::poll_fn(|cx| limited.poll_ready(cx))
                .await
                .expect("ready");
            assert_eq!(limited.call(i).await.expect("call"), i);
        }
        // One at once, then two more at 2/s.
        assert!(
            start.elapsed() >= Duration::from_millis(999),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test]
    async fn in_flight_requests_are_bounded_until_their_bodies_end() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (n, p) = (now.clone(), peak.clone());
        let svc = tower_service_fn(move |req: http::Request<()>| {
            let (n, p) = (n.clone(), p.clone());
            async move {
                if !req.uri().to_string().contains("watch") {
                    let v = n.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(v, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    n.fetch_sub(1, Ordering::SeqCst);
                }
                Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Empty::<
                    bytes::Bytes,
                >::new()))
            }
        });
        let mut limited = InFlightLayer::new(3).layer(svc);
        let get = |path: &str| http::Request::get(path).body(()).expect("request");
        // Watches take no slot: three open watch bodies block nothing.
        let mut watches = Vec::new();
        for _ in 0..3 {
            watches.push(
                limited
                    .call(get("/api/v1/pods?watch=true"))
                    .await
                    .expect("watch"),
            );
        }
        // Each response is dropped as soon as it comes, giving its slot back.
        let calls: Vec<_> = (0..20)
            .map(|_| {
                let call = limited.call(get("/api/v1/pods"));
                async move { call.await.map(drop) }
            })
            .collect();
        let out = futures::future::join_all(calls).await;
        assert_eq!(out.len(), 20);
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        // A body not read to its end keeps its slot.
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(limited.call(get("/api/v1/pods")).await.expect("ok"));
        }
        let blocked = limited.call(get("/api/v1/nodes"));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), blocked)
                .await
                .is_err(),
            "no slot while three bodies are open"
        );
        drop(held);
        limited
            .call(get("/api/v1/nodes"))
            .await
            .expect("a slot again");
        drop(watches);
    }

    struct FnService<F>(F);
    fn tower_service_fn<F>(f: F) -> FnService<F> {
        FnService(f)
    }
    impl<F, Fut, T, R, E> Service<T> for FnService<F>
    where
        F: FnMut(T) -> Fut,
        Fut: Future<Output = Result<R, E>>,
    {
        type Response = R;
        type Error = E;
        type Future = Fut;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), E>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: T) -> Fut {
            (self.0)(req)
        }
    }
}
