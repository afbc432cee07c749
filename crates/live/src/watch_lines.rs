//! A guard on watch responses: every complete line of a watch stream must be a whole JSON
//! value. kube-client drops a line that ends too early (a cut event: a torn proxy
//! buffer, a truncated write) without a word, because it cannot tell it from the last,
//! incomplete line of a closing stream, and the object in that event is then lost until
//! some later relist. Here such a line, and any other line that is not JSON, is
//! replaced by the `410 Expired` ERROR event an API server sends when a watch cannot go
//! on, so the watcher lists again and misses nothing. The incomplete tail of a stream
//! that ends is passed on as it is: the watcher resumes from the last event it had,
//! which the server sends again.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame};

/// The start of the message of the ERROR event that replaces an undecodable line; the
/// watcher tells this relist from the server's own 410s by it.
pub const UNDECODABLE_MESSAGE: &str = "kubesched: a watch line could not be decoded";

/// The line that stands for an undecodable one.
fn expired_event(error: &serde_json::Error) -> Bytes {
    let status = serde_json::json!({
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("{UNDECODABLE_MESSAGE} ({error}); listing again"),
            "reason": "Expired",
            "code": 410,
        },
    });
    let mut line = status.to_string().into_bytes();
    line.push(b'\n');
    Bytes::from(line)
}

/// Whether a request is a watch (`watch=true` or `watch=1` in its query).
pub fn is_watch<B>(req: &http::Request<B>) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

/// A response body whose complete lines are checked as described in the module docs.
pub struct CheckedLines<B> {
    inner: B,
    /// Bytes of a line not complete yet.
    partial: BytesMut,
    /// Checked lines not handed out yet.
    ready: VecDeque<Bytes>,
    /// What the request watched, for the log.
    what: String,
    done: bool,
}

impl<B> CheckedLines<B> {
    /// Checks the lines of `inner`, the body of a watch of `what`.
    pub fn new(inner: B, what: String) -> Self {
        Self {
            inner,
            partial: BytesMut::new(),
            ready: VecDeque::new(),
            what,
            done: false,
        }
    }

    fn take_lines(&mut self, mut data: Bytes) {
        while let Some(end) = data.iter().position(|b| *b == b'\n') {
            let piece = data.split_to(end + 1);
            let line = if self.partial.is_empty() {
                piece
            } else {
                self.partial.extend_from_slice(&piece);
                self.partial.split().freeze()
            };
            self.ready.push_back(self.checked(line));
        }
        if data.has_remaining() {
            self.partial.extend_from_slice(&data);
        }
    }

    fn checked(&self, line: Bytes) -> Bytes {
        let text = &line[..line.len() - 1];
        if text.iter().all(u8::is_ascii_whitespace) {
            return line;
        }
        match serde_json::from_slice::<serde::de::IgnoredAny>(text) {
            Ok(_) => line,
            Err(e) => {
                tracing::warn!(watch = %self.what, error = %e, bytes = text.len(), "a watch line is not JSON (cut or garbled); the watcher lists again");
                expired_event(&e)
            }
        }
    }
}

impl<B> HttpBody for CheckedLines<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        loop {
            if let Some(line) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(line))));
            }
            if this.done {
                if this.partial.is_empty() {
                    return Poll::Ready(None);
                }
                // The incomplete tail of a stream that ended, passed on unchecked.
                let tail = this.partial.split().freeze();
                return Poll::Ready(Some(Ok(Frame::data(tail))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.done = true,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.take_lines(data),
                    // Trailers carry no lines.
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
            }
        }
    }
}

/// A response body, checked when it answers a watch.
pub type GuardedBody = http_body_util::combinators::UnsyncBoxBody<Bytes, hyper::Error>;

/// The service under the kube clients that puts [`CheckedLines`] on every watch answer.
#[derive(Debug, Clone)]
pub struct WatchLineGuard<S> {
    inner: S,
}

impl<S> WatchLineGuard<S> {
    /// Guards the watches `inner` answers.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, ReqBody> tower_service::Service<http::Request<ReqBody>> for WatchLineGuard<S>
where
    S: tower_service::Service<
            http::Request<ReqBody>,
            Response = http::Response<hyper::body::Incoming>,
        >,
    S::Future: Send + 'static,
{
    type Response = http::Response<GuardedBody>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        use http_body_util::BodyExt;
        let watched = is_watch(&req).then(|| req.uri().path().to_string());
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| match watched {
                Some(what) => CheckedLines::new(body, what).boxed_unsync(),
                None => body.boxed_unsync(),
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    /// The lines a body of these chunks gives.
    fn lines_of(chunks: &[&str]) -> Vec<String> {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from(c.to_string()))))
            .collect();
        let body = CheckedLines::new(
            StreamBody::new(futures::stream::iter(frames)),
            "pods".into(),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let collected = runtime
            .block_on(body.collect())
            .expect("no error")
            .to_bytes();
        String::from_utf8(collected.to_vec())
            .expect("text")
            .split_inclusive('\n')
            .map(str::to_string)
            .collect()
    }

    fn expired(line: &str) -> bool {
        let v: serde_json::Value = serde_json::from_str(line).expect("the ERROR event is JSON");
        v["type"] == "ERROR"
            && v["object"]["code"] == 410
            && v["object"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(UNDECODABLE_MESSAGE))
    }

    #[test]
    fn whole_events_pass_however_they_are_chunked() {
        let a = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n";
        let b = "{\"type\":\"BOOKMARK\",\"object\":{}}\n";
        assert_eq!(lines_of(&[a, b]), [a, b]);
        let joined = format!("{a}{b}");
        let (x, y) = joined.split_at(10);
        let (y, z) = y.split_at(40);
        assert_eq!(lines_of(&[x, y, z]), [a, b]);
    }

    #[test]
    fn a_cut_or_garbled_line_becomes_an_expired_error() {
        let good = "{\"type\":\"ADDED\",\"object\":{}}\n";
        let cut = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"na\n";
        let garbage = "{this is not json\n";
        let out = lines_of(&[good, cut, good, garbage]);
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(out[0], good);
        assert!(expired(&out[1]), "{}", out[1]);
        assert_eq!(out[2], good);
        assert!(expired(&out[3]), "{}", out[3]);
    }

    #[test]
    fn the_incomplete_tail_of_an_ended_stream_is_passed_on() {
        let good = "{\"type\":\"ADDED\",\"object\":{}}\n";
        assert_eq!(
            lines_of(&[good, "{\"type\":\"MOD"]),
            [good, "{\"type\":\"MOD"]
        );
        assert_eq!(lines_of(&["\n", good]), ["\n", good]);
    }

    #[test]
    fn watches_are_told_by_their_query() {
        let req = |uri: &str| http::Request::get(uri).body(()).expect("request");
        assert!(is_watch(&req("/api/v1/pods?watch=true&resourceVersion=5")));
        assert!(is_watch(&req("/api/v1/pods?resourceVersion=5&watch=1")));
        assert!(!is_watch(&req("/api/v1/pods?limit=500")));
        assert!(!is_watch(&req("/api/v1/pods?nowatch=true")));
    }
}
