//! The response body type and small response builders.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;

/// Every response body the front produces: bytes known whole (most answers: held
/// inline, nothing boxed), or a stream (event streams, relays); and, for the answers
/// built by [`json`], its static `Content-Type`, which the connection writes with the
/// head — so a JSON answer needs no header map.
pub struct Body(Kind, Option<&'static str>);

enum Kind {
    /// The bytes not yet sent (`None` once sent, or for an empty body).
    Whole(Option<Bytes>),
    Stream(UnsyncBoxBody<Bytes, Infallible>),
}

impl Body {
    /// The `Content-Type` the body carries (written unless the headers set one).
    pub fn content_type(&self) -> Option<&'static str> {
        self.1
    }

    /// A body that streams `body`'s frames.
    pub fn stream<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes, Error = Infallible> + Send + 'static,
    {
        Body(Kind::Stream(body.boxed_unsync()), None)
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.get_mut().0 {
            Kind::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Stream(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Kind::Whole(bytes) => bytes.is_none(),
            Kind::Stream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Kind::Whole(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            Kind::Stream(body) => body.size_hint(),
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Kind::Whole(b) => write!(f, "Body::Whole({} bytes)", b.as_ref().map_or(0, Bytes::len)),
            Kind::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

/// A request's body as the connection driver hands it to a handler: read whole before
/// the handler runs (bounded in size and time by the driver), or not read at all when its
/// declared length is above what the driver buffers (reading it is then an error, and
/// the connection closes after the answer).
#[derive(Debug)]
pub struct ReqBody(ReqKind);

#[derive(Debug)]
enum ReqKind {
    Whole(Option<Bytes>),
    Unread,
}

/// Reading a body the driver left unread because it was declared too large.
#[derive(Debug, thiserror::Error)]
#[error("request body not read: declared larger than the gateway buffers")]
pub struct BodyNotRead;

impl ReqBody {
    /// A body of these bytes.
    pub fn whole(b: Bytes) -> ReqBody {
        ReqBody(ReqKind::Whole((!b.is_empty()).then_some(b)))
    }

    /// An empty body.
    pub fn empty() -> ReqBody {
        ReqBody(ReqKind::Whole(None))
    }

    /// A body that was not read.
    pub(crate) fn unread() -> ReqBody {
        ReqBody(ReqKind::Unread)
    }

    /// Its bytes, held already (no I/O, no waiting).
    pub(crate) fn into_bytes(self) -> Result<Bytes, BodyNotRead> {
        match self.0 {
            ReqKind::Whole(b) => Ok(b.unwrap_or_default()),
            ReqKind::Unread => Err(BodyNotRead),
        }
    }
}

impl http_body::Body for ReqBody {
    type Data = Bytes;
    type Error = BodyNotRead;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyNotRead>>> {
        match &mut self.get_mut().0 {
            ReqKind::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ReqKind::Unread => Poll::Ready(Some(Err(BodyNotRead))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.0, ReqKind::Whole(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            ReqKind::Whole(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            ReqKind::Unread => SizeHint::default(),
        }
    }
}

/// Whether `body`'s bytes are all known and held (an answer the driver writes in one go).
pub(crate) fn whole_bytes(body: &mut Body) -> Option<Option<Bytes>> {
    match &mut body.0 {
        Kind::Whole(b) => Some(b.take()),
        Kind::Stream(_) => None,
    }
}

/// A body of these bytes.
pub fn full(b: impl Into<Bytes>) -> Body {
    let b = b.into();
    Body(Kind::Whole((!b.is_empty()).then_some(b)), None)
}

/// An empty body.
pub fn empty() -> Body {
    Body(Kind::Whole(None), None)
}

/// A `application/json` response of these bytes (the type carried by the body: see
/// [`Body`]).
pub fn json(status: StatusCode, b: impl Into<Bytes>) -> Response<Body> {
    let mut body = full(b);
    body.1 = Some("application/json");
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r
}

/// A `text/plain` response.
pub fn text(status: StatusCode, s: &'static str) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from_static(s.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A `200 text/event-stream` response with the usual anti-buffering headers.
pub fn event_stream(body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    no_buffering(h);
    r
}

/// The headers that keep caches and proxies (nginx's `X-Accel-Buffering`) from holding an
/// event stream back; a `Cache-Control` already there is kept.
pub fn no_buffering(h: &mut http::HeaderMap) {
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

/// An empty response with `status`.
pub fn status(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(empty());
    *r.status_mut() = status;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn whole_bodies_say_their_length_and_end() {
        let b = full("abc");
        assert_eq!(http_body::Body::size_hint(&b).exact(), Some(3));
        assert!(!http_body::Body::is_end_stream(&b));
        assert_eq!(b.collect().await.unwrap().to_bytes(), "abc");
        let e = empty();
        assert!(http_body::Body::is_end_stream(&e));
        assert_eq!(http_body::Body::size_hint(&e).exact(), Some(0));
        let frames = futures::stream::iter(["a", "b"].map(|s| Ok(Frame::data(Bytes::from(s)))));
        let s = Body::stream(http_body_util::StreamBody::new(frames));
        assert_eq!(s.collect().await.unwrap().to_bytes(), "ab");
    }
}
