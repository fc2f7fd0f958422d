//! The response body type and small response builders.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};

/// Every response body the front produces.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A body of these bytes.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed_unsync()
}

/// An empty body.
pub fn empty() -> Body {
    Empty::new().boxed_unsync()
}

/// A `application/json` response of these bytes.
pub fn json(status: StatusCode, b: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(b));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
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
