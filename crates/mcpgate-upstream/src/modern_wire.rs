//! One 2026-07-28 exchange on an endpoint: the request POSTed with its headers (the
//! configured ones win), the answer's status, content type and body as they arrive. Used
//! by the pass-through ([`crate::Connector::forward`]) and the era bridge's session for
//! 2026-07-28-only servers (in `mcpgate-compose`).

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use std::sync::Arc;

use http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue};
use http_body_util::BodyDataStream;

use crate::credential::Credential;
use crate::endpoint::Endpoint;
use crate::error::UpstreamError;
use crate::transport::UpBody;

/// A 2026-07-28 request to forward: the body as it came and the headers to re-emit.
#[derive(Debug, Clone, Default)]
pub struct ModernRequest {
    /// The JSON-RPC body.
    pub body: Bytes,
    /// `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`, trace context.
    pub headers: HeaderMap,
}

/// The upstream's answer, still arriving.
pub struct ModernResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers worth passing on (`content-type`, `cache-control`).
    pub headers: HeaderMap,
    /// The body, as the upstream sends it.
    pub body: BoxStream<'static, Result<Bytes, UpstreamError>>,
}

impl std::fmt::Debug for ModernResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModernResponse")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl ModernResponse {
    /// Whether the answer is an SSE stream.
    pub fn is_event_stream(&self) -> bool {
        self.headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
    }
}

/// POSTs `req` on `endpoint`, with `credential`'s `Authorization` when there is one (a
/// `401` then gets one renewed credential and one more try); only the answer's head is
/// bounded by `timeout` (a listen stream lives as long as its client).
pub async fn exchange(
    endpoint: &Endpoint,
    timeout: std::time::Duration,
    req: ModernRequest,
    credential: Option<&Arc<dyn Credential>>,
) -> Result<ModernResponse, UpstreamError> {
    // Kept for a second try only when one can follow.
    let mut req = req;
    let send = |auth, last| {
        let r = if last {
            std::mem::take(&mut req)
        } else {
            req.clone()
        };
        post(endpoint, timeout, r, auth)
    };
    let refused = |r: &http::Response<UpBody>| r.status() == http::StatusCode::UNAUTHORIZED;
    let resp = crate::credential::authorized(credential, send, refused).await?;
    let status = resp.status().as_u16();
    if (300..400).contains(&status) {
        return Err(endpoint.status_error(status, resp.headers()));
    }
    let mut headers = HeaderMap::new();
    for name in [CONTENT_TYPE, CACHE_CONTROL] {
        if let Some(v) = resp.headers().get(&name) {
            headers.insert(name, v.clone());
        }
    }
    let body = BodyDataStream::new(resp.into_body()).boxed();
    Ok(ModernResponse {
        status,
        headers,
        body,
    })
}

/// One POST of `req` with `auth`.
async fn post(
    endpoint: &Endpoint,
    timeout: std::time::Duration,
    req: ModernRequest,
    auth: Option<HeaderValue>,
) -> Result<http::Response<UpBody>, UpstreamError> {
    let request = endpoint.post(req.body, |h| {
        // The configured headers (and Accept, Content-Type) win over the client's: the
        // client's are added to the endpoint's map, each value of a name the endpoint does
        // not set (a value without a name repeats the name before it).
        let mut name = None;
        for (k, v) in req.headers {
            if k.is_some() {
                name = k;
            }
            if let Some(n) = &name
                && !endpoint.sets(n)
            {
                h.append(n.clone(), v);
            }
        }
        if let Some(a) = auth {
            h.insert(AUTHORIZATION, a);
        }
    });
    tokio::time::timeout(timeout, endpoint.send(request))
        .await
        .map_err(|_| UpstreamError::Timeout(timeout))?
}
