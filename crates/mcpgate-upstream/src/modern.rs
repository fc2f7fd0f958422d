//! MCP 2026-07-28 toward HTTP upstreams: every request is its own exchange, with no
//! upstream session. The gateway re-emits the request's mirrored headers (and every
//! `Mcp-Param-*`, untouched), adds the server's configured headers, and streams the answer
//! back as bytes; dropping the answer's body closes the upstream connection, which is how
//! this revision cancels a request. [`Connector::probe`] asks a server which era it
//! speaks (`server/discover`).

use bytes::Bytes;
use futures::StreamExt;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue};
use mcpgate_jsonrpc::{Message, Method, mcp, modern};
use serde_json::json;

use crate::connector::Connector;
use crate::error::UpstreamError;
use crate::target::Target;

pub use crate::modern_wire::{ModernRequest, ModernResponse};

/// Which era a server speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It answers 2026-07-28 requests (`server/discover` succeeded, or named a modern
    /// version it supports).
    Modern,
    /// It does not: its answer to `server/discover` was a session-era error.
    Session,
}

/// The gateway's own `server/discover`, at 2026-07-28, declaring no client capabilities.
pub fn discover_request(id: &str) -> Bytes {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": Method::Discover.as_str(),
        "params": {"_meta": {
            modern::META_PROTOCOL_VERSION: mcp::MODERN_PROTOCOL_VERSION,
            modern::META_CLIENT_INFO: {"name": "mcpgate", "version": env!("CARGO_PKG_VERSION")},
            modern::META_CLIENT_CAPABILITIES: {},
        }},
    });
    Bytes::from(body.to_string())
}

/// Classifies the answer to a `server/discover`: a result listing a modern version, or a
/// `-32022` whose `data.supported` lists one, is modern; any other JSON-RPC answer (or
/// none) is the session era, as the SDK clients decide.
pub fn classify(answer: &Message) -> Verdict {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(answer.raw()) else {
        return Verdict::Session;
    };
    let lists_modern = |list: Option<&serde_json::Value>| {
        list.and_then(|l| l.as_array()).is_some_and(|l| {
            l.iter()
                .filter_map(|x| x.as_str())
                .any(mcp::is_modern_version)
        })
    };
    if lists_modern(v.pointer("/result/supportedVersions")) {
        return Verdict::Modern;
    }
    if v.pointer("/error/code").and_then(|c| c.as_i64())
        == Some(mcpgate_jsonrpc::error::UNSUPPORTED_VERSION)
        && lists_modern(v.pointer("/error/data/supported"))
    {
        return Verdict::Modern;
    }
    Verdict::Session
}

impl Connector {
    /// Forwards one 2026-07-28 request of `principal` to an HTTP `target` and returns its
    /// answer as it arrives (any status: the upstream's own 4xx JSON-RPC errors are
    /// answers too).
    pub async fn forward(
        &self,
        target: &Target,
        req: ModernRequest,
        principal: Option<&str>,
    ) -> Result<ModernResponse, UpstreamError> {
        let endpoint = self.endpoint(target)?;
        let credential = target.credential(principal)?;
        let timeout = self.timeouts.request;
        crate::modern_wire::exchange(&endpoint, timeout, req, credential.as_ref()).await
    }

    /// Asks an HTTP `target` which era it speaks, with the gateway's own
    /// `server/discover` (with `principal`'s credential, when the server needs one). A
    /// network failure or a 5xx is an error (no verdict).
    pub async fn probe(
        &self,
        target: &Target,
        principal: Option<&str>,
    ) -> Result<Verdict, UpstreamError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            mcp::PROTOCOL_VERSION_HEADER,
            HeaderValue::from_static(mcp::MODERN_PROTOCOL_VERSION),
        );
        if let Some(name) = Method::Discover.static_name() {
            headers.insert(mcp::METHOD_HEADER, HeaderValue::from_static(name));
        }
        let resp = self
            .forward(
                target,
                ModernRequest {
                    body: discover_request("mcpgate-probe"),
                    headers,
                },
                principal,
            )
            .await?;
        if resp.status >= 500 {
            return Err(UpstreamError::Status(resp.status));
        }
        let mut body = resp.body;
        let mut all = Vec::new();
        while let Some(chunk) = body.next().await {
            all.extend_from_slice(&chunk?);
            if all.len() > 1 << 20 {
                break;
            }
        }
        let text = Bytes::from(all);
        // An SSE answer carries the result in a `data:` line.
        let json = if resp
            .headers
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.to_str().is_ok_and(|v| v.starts_with("text/event-stream")))
        {
            text.split(|b| *b == b'\n')
                .filter_map(|l| l.strip_prefix(b"data:"))
                .map(|d| d.strip_prefix(b" ").unwrap_or(d))
                .find(|d| d.starts_with(b"{") && d.windows(4).any(|w| w == b"\"id\""))
                .map(Bytes::copy_from_slice)
                .unwrap_or_default()
        } else {
            text
        };
        Ok(match Message::parse(json) {
            Ok(m) => classify(&m),
            Err(_) => Verdict::Session,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Message {
        Message::parse(Bytes::copy_from_slice(s.as_bytes())).unwrap()
    }

    #[test]
    fn discover_is_valid_json_rpc() {
        let d = Message::parse(discover_request("p")).unwrap();
        assert_eq!(d.method(), Some(&Method::Discover));
        assert!(d.claims_modern());
    }

    #[test]
    fn verdicts() {
        assert_eq!(
            classify(&m(
                r#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}"#
            )),
            Verdict::Modern
        );
        assert_eq!(
            classify(&m(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2026-07-28","2025-11-25"],"requested":"2026-07-28"}}}"#
            )),
            Verdict::Modern
        );
        assert_eq!(
            classify(&m(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2025-11-25"]}}}"#
            )),
            Verdict::Session
        );
        assert_eq!(
            classify(&m(
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID"}}"#
            )),
            Verdict::Session
        );
        assert_eq!(
            classify(&m(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}"#
            )),
            Verdict::Session
        );
    }
}
