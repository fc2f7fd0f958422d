//! One configured HTTP endpoint, resolved once: its parsed URL, the request-target and
//! the configured headers as a header map, and the [`Transport`] that reaches it. Every
//! session of a server shares its `Endpoint` (an `Arc`); building a request from it
//! parses nothing.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST, LOCATION};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Uri};

use crate::error::{Redirect, RedirectRule, UpstreamError};
use crate::transport::{Transport, UpBody};
use crate::wire::Outgoing;

/// Headers a request adds to the endpoint's own: `Mcp-Session-Id`,
/// `MCP-Protocol-Version`, `traceparent`, `tracestate`.
const EXTRA_HEADERS: usize = 4;

/// `Accept` of a POST: both answer kinds.
pub(crate) const ACCEPT_BOTH: HeaderValue =
    HeaderValue::from_static("application/json, text/event-stream");
/// `Accept` of a GET stream.
pub(crate) const ACCEPT_SSE: HeaderValue = HeaderValue::from_static("text/event-stream");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// A configured HTTP endpoint, ready to take requests (shared by every session of a
/// server; its fields are the transport's).
#[derive(Debug)]
pub struct Endpoint {
    transport: Transport,
    url: Uri,
    target: Uri,
    /// The configured headers with `Accept` and `Content-Type` of a POST.
    post: HeaderMap,
    /// The configured headers with the `Accept` of a GET stream.
    get: HeaderMap,
    /// The configured headers alone.
    configured: HeaderMap,
    /// `post` encoded once, for the direct path.
    post_fields: Vec<u8>,
}

impl Endpoint {
    pub(crate) fn new(transport: Transport, url: Uri, configured: HeaderMap) -> Arc<Self> {
        let target = transport.request_target(&url);
        let mut post = configured.clone();
        post.insert(ACCEPT, ACCEPT_BOTH);
        post.insert(CONTENT_TYPE, JSON);
        let mut get = configured.clone();
        get.insert(ACCEPT, ACCEPT_SSE);
        let mut post_fields = Vec::new();
        mcpgate_h1::encode_fields(&mut post_fields, &post);
        Arc::new(Endpoint {
            transport,
            url,
            target,
            post,
            get,
            configured,
            post_fields,
        })
    }

    /// A POST of `body` with the configured headers, `Accept` and `Content-Type`, plus
    /// `extra` (which may override them).
    pub(crate) fn post(&self, body: Bytes, extra: impl FnOnce(&mut HeaderMap)) -> Request<Bytes> {
        self.build(Method::POST, &self.post, body, extra)
    }

    /// Sends a POST of `body` with the endpoint's headers and `more` (a session's id,
    /// protocol version, credential) and returns the answer's head. Directly reached, the endpoint's
    /// fields go out as encoded once, without a header map per request.
    pub(crate) async fn send_post(
        &self,
        body: Bytes,
        more: [Option<(&HeaderName, &HeaderValue)>; 3],
    ) -> Result<Response<UpBody>, UpstreamError> {
        let Some(origin) = self.transport.direct() else {
            let req = self.post(body, |h| {
                for (name, value) in more.iter().flatten() {
                    h.insert((*name).clone(), (*value).clone());
                }
                mcpgate_telemetry::inject(h);
            });
            return self.send(req).await;
        };
        // Trace context only when tracing is on (a map of its own then).
        let mut trace = HeaderMap::new();
        if mcpgate_telemetry::enabled() {
            mcpgate_telemetry::inject(&mut trace);
        }
        let out = Outgoing {
            method: &Method::POST,
            target: self.target.clone(),
            pre: &self.post_fields,
            more,
            headers: (!trace.is_empty()).then_some(&trace),
            has_host: self.post.contains_key(HOST),
            body: &body,
        };
        origin.send_following(out).await
    }

    /// A GET of the session's stream.
    pub(crate) fn get(&self, extra: impl FnOnce(&mut HeaderMap)) -> Request<Bytes> {
        self.build(Method::GET, &self.get, Bytes::new(), extra)
    }

    /// A DELETE.
    pub(crate) fn delete(&self, extra: impl FnOnce(&mut HeaderMap)) -> Request<Bytes> {
        self.build(Method::DELETE, &self.configured, Bytes::new(), extra)
    }

    /// Whether the endpoint's own POST headers set `name` (then a client's value of it is
    /// not forwarded).
    pub(crate) fn sets(&self, name: &http::HeaderName) -> bool {
        self.post.contains_key(name)
    }

    fn build(
        &self,
        method: Method,
        base: &HeaderMap,
        body: Bytes,
        extra: impl FnOnce(&mut HeaderMap),
    ) -> Request<Bytes> {
        let mut req = Request::new(body);
        *req.method_mut() = method;
        *req.uri_mut() = self.target.clone();
        // Sized for what `extra` adds (session id, protocol version, trace context), so
        // adding them does not grow the map again.
        let mut h = HeaderMap::with_capacity(base.len() + EXTRA_HEADERS);
        for (name, value) in base {
            h.append(name.clone(), value.clone());
        }
        extra(&mut h);
        *req.headers_mut() = h;
        req
    }

    /// Sends `req` and returns the answer's head; its body streams as it arrives.
    pub(crate) async fn send(
        &self,
        req: Request<Bytes>,
    ) -> Result<Response<UpBody>, UpstreamError> {
        self.transport.send(req, &self.url).await
    }

    /// The error for a failure status: a redirect that was not followed names its target
    /// and why; any other status is just the status.
    pub(crate) fn status_error(&self, status: u16, headers: &HeaderMap) -> UpstreamError {
        status_error(status, headers, &self.url)
    }
}

/// See [`Endpoint::status_error`].
pub(crate) fn status_error(status: u16, headers: &HeaderMap, configured: &Uri) -> UpstreamError {
    if !(300..400).contains(&status) {
        return UpstreamError::Status(status);
    }
    let base = reqwest::Url::parse(&configured.to_string()).ok();
    let target = headers
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|l| base.as_ref()?.join(l).ok());
    let (Some(target), Some(base)) = (target, base) else {
        return Redirect::NoLocation { status }.into();
    };
    let rule = if target.origin() != base.origin() {
        RedirectRule::OtherOrigin
    } else if !matches!(status, 307 | 308) {
        RedirectRule::ChangesMethod
    } else {
        RedirectRule::TooMany
    };
    Redirect::NotFollowed {
        status,
        target: target.to_string(),
        rule,
    }
    .into()
}

/// Whether a response is an SSE stream.
pub(crate) fn is_event_stream(h: &HeaderMap) -> bool {
    h.get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}
