//! Building HTTP answers (JSON, SSE, errors) and reading request headers.

use std::convert::Infallible;

use bytes::Bytes;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, ORIGIN};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use serde_json::Value;

use crate::rpc;

/// Any error a response body may end in.
pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The one body type every answer uses.
pub(super) type Body = UnsyncBoxBody<Bytes, BoxError>;

pub(super) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

pub(super) fn empty() -> Body {
    Empty::new()
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

pub(super) fn response(
    status: StatusCode,
    content_type: Option<&'static str>,
    body: Body,
) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    if let Some(ct) = content_type {
        resp.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    resp
}

pub(super) fn json(status: StatusCode, body: String) -> Response<Body> {
    response(status, Some("application/json"), full(body))
}

/// An HTTP-level error carrying a JSON-RPC error body.
pub(super) fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    json(status, rpc::error_response(&Value::Null, code, message))
}

pub(super) fn status_only(status: StatusCode) -> Response<Body> {
    response(status, None, empty())
}

pub(super) fn sse_response(body: Body) -> Response<Body> {
    let mut resp = response(StatusCode::OK, Some("text/event-stream"), body);
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

pub(super) fn header_str(
    headers: &HeaderMap,
    name: impl http::header::AsHeaderName,
) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

pub(super) fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    headers.get_all(ACCEPT).iter().any(|v| {
        v.to_str().is_ok_and(|s| {
            s.split(',').any(|part| {
                let m = part.split(';').next().unwrap_or("").trim();
                m.eq_ignore_ascii_case(mime) || m == "*/*"
            })
        })
    })
}

/// DNS-rebinding protection: a browser Origin must be a loopback one.
pub(super) fn origin_ok(headers: &HeaderMap) -> bool {
    let Some(origin) = header_str(headers, ORIGIN) else {
        return true;
    };
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or(origin);
    ["localhost", "127.0.0.1", "[::1]"].iter().any(|host| {
        rest.strip_prefix(host)
            .is_some_and(|tail| tail.is_empty() || tail.starts_with(':') || tail.starts_with('/'))
    })
}
