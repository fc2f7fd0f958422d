//! What the v2 endpoints answer: JSON bodies (`{"error": …}` on refusals, as the UI
//! reads them) and SSE streams.

use bytes::Bytes;
use futures::Stream;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use mcpgate_server::body::{Body, json};
use serde_json::Value;

/// `200` with this JSON.
pub(crate) fn ok(v: Value) -> Response<Body> {
    json(StatusCode::OK, v.to_string())
}

/// `status` with `{"error": msg}`.
pub(crate) fn error(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    json(
        status,
        serde_json::json!({ "error": msg.into() }).to_string(),
    )
}

/// An SSE response of these chunks.
pub(crate) fn sse<S>(chunks: S) -> Response<Body>
where
    S: Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
{
    use futures::StreamExt;
    let body = StreamBody::new(chunks.map(|c| c.map(Frame::data))).boxed_unsync();
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
