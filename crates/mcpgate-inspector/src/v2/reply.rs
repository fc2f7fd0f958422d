//! What the v2 endpoints answer: JSON bodies (`{"error": …}` on refusals, as the UI
//! reads them) and SSE streams.

use bytes::Bytes;
use futures::Stream;
use http::{Response, StatusCode};
use http_body_util::StreamBody;
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
    let body = Body::stream(StreamBody::new(chunks.map(|c| c.map(Frame::data))));
    mcpgate_server::body::event_stream(body)
}
