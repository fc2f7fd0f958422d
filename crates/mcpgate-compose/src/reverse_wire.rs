//! The era bridge's exchanges with a 2026-07-28-only server: each request POSTed on its
//! own with the revision's headers, the answer read as messages.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderMap, HeaderValue};
use mcpgate_jsonrpc::{Message, Method, mcp};
use mcpgate_upstream::{
    Cause, Credential, Endpoint, ModernRequest, ModernResponse, ProtocolError, UpstreamError,
};
use serde_json::Value;
use tokio::sync::oneshot;

/// Where the bridge sends: the server's endpoint, resolved once, the bound on an
/// answer's head, and the session principal's credential toward the server.
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    pub(crate) endpoint: Arc<Endpoint>,
    pub(crate) timeout: std::time::Duration,
    pub(crate) credential: Option<Arc<dyn Credential>>,
}

impl Wire {
    /// POSTs `body` as a request of `method` (its `Mcp-Name` and `Mcp-Param-*` in
    /// `extra`) and reads the answer's messages.
    pub(crate) async fn post(
        &self,
        body: Bytes,
        headers: HeaderMap,
    ) -> Result<BoxStream<'static, Result<Message, UpstreamError>>, UpstreamError> {
        let resp = mcpgate_upstream::exchange(
            &self.endpoint,
            self.timeout,
            ModernRequest { body, headers },
            self.credential.as_ref(),
        )
        .await?;
        Ok(messages(resp))
    }

    /// The response in the answer to `body` (what comes before it is the gateway's own
    /// request's, and goes nowhere).
    pub(crate) async fn ask(
        &self,
        body: Bytes,
        headers: HeaderMap,
    ) -> Result<Message, UpstreamError> {
        let mut messages = self.post(body, headers).await?;
        loop {
            match messages.next().await {
                Some(Ok(m)) if m.is_response() => return Ok(m),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Err(ProtocolError::NoResponse.into()),
            }
        }
    }
}

/// The headers of a 2026-07-28 request of `method` about `name`.
pub(crate) fn headers(method: &Method, name: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        mcp::PROTOCOL_VERSION_HEADER,
        HeaderValue::from_static(mcp::MODERN_PROTOCOL_VERSION),
    );
    if let Ok(v) = HeaderValue::from_str(method.as_str()) {
        h.insert(mcp::METHOD_HEADER, v);
    }
    if let Some(v) = name
        .and_then(|n| HeaderValue::from_str(&mcpgate_jsonrpc::modern::encode_header_value(n)).ok())
    {
        h.insert(mcp::NAME_HEADER, v);
    }
    h
}

/// The client's answers awaited, by the id of the request put to it.
pub(crate) type Asks = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// The JSON-RPC messages of a 2026-07-28 answer (one JSON message, or SSE events).
fn messages(resp: ModernResponse) -> BoxStream<'static, Result<Message, UpstreamError>> {
    let sse = resp.is_event_stream();
    let body = resp.body;
    if sse {
        return sse_stream::SseStream::from_bytes_stream(body)
            .filter_map(|ev| async move {
                match ev {
                    Ok(ev) => ev
                        .data
                        .filter(|d| !d.is_empty())
                        .map(|d| Message::parse(Bytes::from(d)).map_err(UpstreamError::from)),
                    Err(e) => Some(Err(UpstreamError::Io(Cause::new(e)))),
                }
            })
            .boxed();
    }
    futures::stream::once(async move {
        let mut all = Vec::new();
        let mut body = body;
        while let Some(chunk) = body.next().await {
            all.extend_from_slice(&chunk?);
        }
        Ok(Message::parse(Bytes::from(all))?)
    })
    .boxed()
}
