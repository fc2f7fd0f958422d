//! The MCP endpoint's dispatch: by HTTP method, and for a POST by protocol era —
//! decided once, here, before either era's handler sees it (`mcp.rs`: sessions;
//! `modern.rs`: 2026-07-28).
//!
//! The rule (the issue's, and the spec's "Backward Compatibility"): a request naming an
//! `Mcp-Session-Id` is a session-era request; so is `initialize`, and a request whose
//! `MCP-Protocol-Version` is a session-era version or absent. A request whose header names
//! 2026-07-28 (or, without a header, whose body claims it in `_meta`) is a modern request.
//! A version mcpgate does not speak gets `-32022` with the versions it does and the
//! request's id.

use std::sync::Arc;

use http::{HeaderMap, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use mcpgate_jsonrpc::{Incoming as Parsed, Message, mcp, modern};
use mcpgate_session::ServerSpec;
use tracing::{Instrument, info};

use crate::body::{Body, json};
use crate::error::FrontError;
use crate::front::Front;
use crate::request::Who;

/// The era of one POST.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Era {
    Session,
    Modern,
    /// `MCP-Protocol-Version` names a version mcpgate does not speak.
    Unsupported(String),
}

/// Answers one request to an MCP endpoint.
pub(crate) async fn handle(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    req: Request<Incoming>,
    who: &Who,
    legacy_prefix: Option<&str>,
    peer: std::net::IpAddr,
) -> Response<Body> {
    let method = req.method().clone();
    // Every log line of this request, in every crate, carries the server, the session's
    // id prefix and the MCP method (filled in once known) — when debug logging is on for
    // this crate (`RUST_LOG=info,mcpgate_server=debug`): an info-level span costs about
    // 10 µs of CPU per request, a fifth of the gateway's whole cost. Session-scoped lines
    // carry `session` and `server` fields at every level.
    //
    // With OpenTelemetry on (`[telemetry]`), this span is exported: a client's `traceparent`
    // is its parent, and it records the tool/resource/prompt name and the outcome (the
    // HTTP status, and the JSON-RPC error code of a JSON answer that is an error).
    // An unsampled request (tracing on) gets no span at all: building one is what costs.
    let span = if !mcpgate_telemetry::sampled(req.headers()) {
        tracing::Span::none()
    } else {
        tracing::debug_span!(
        "mcp",
        "otel.kind" = "server",
        server = %server.name,
        session = tracing::field::Empty,
        method = tracing::field::Empty,
        name = tracing::field::Empty,
        era = tracing::field::Empty,
        outcome = tracing::field::Empty,
        "otel.status_code" = tracing::field::Empty,
        )
    };
    mcpgate_telemetry::set_parent(&span, req.headers());
    if let Some(sid) = req
        .headers()
        .get(mcp::SESSION_ID_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        span.record("session", mcpgate_session::short_id(sid));
    }
    let result = async {
        match method {
            Method::POST => post(front, server, req, who, peer).await,
            Method::GET | Method::DELETE if is_modern_header(req.headers()) => {
                // 2026-07-28 has no GET stream and no DELETE.
                Err(FrontError::MethodNotAllowed("POST"))
            }
            Method::GET => crate::mcp::get(front, server, req.headers(), who, legacy_prefix).await,
            Method::DELETE => crate::mcp::delete(front, server, req.headers(), who).await,
            _ => Err(FrontError::MethodNotAllowed("GET, POST, DELETE")),
        }
    }
    .instrument(span.clone())
    .await;
    let resp = result.unwrap_or_else(|e| {
        info!(server = %server.name, %method, era = "2025", error = %e, "request refused");
        e.into_response(None)
    });
    if !span.is_disabled() {
        let status = resp.status();
        span.record("outcome", status.as_u16());
        if status.is_server_error() {
            span.record("otel.status_code", "ERROR");
        }
    }
    resp
}

/// Whether the request's `MCP-Protocol-Version` header names the sessionless era.
pub(crate) fn is_modern_header(h: &HeaderMap) -> bool {
    h.get(mcp::PROTOCOL_VERSION_HEADER)
        .and_then(|v| modern::header_value(v.as_bytes()).ok())
        .is_some_and(|v| mcp::is_modern_version(&v))
}

/// The era of a POST from its headers and (only when the headers do not say) its body.
pub(crate) fn decide(h: &HeaderMap, parsed: &Parsed) -> Era {
    let session = h.contains_key(mcp::SESSION_ID_HEADER);
    if let Some(v) = h.get(mcp::PROTOCOL_VERSION_HEADER) {
        return match modern::header_value(v.as_bytes()) {
            Ok(v) if mcp::is_session_version(&v) => Era::Session,
            Ok(_) if session => Era::Session,
            Ok(v) if mcp::is_modern_version(&v) && mcp::is_supported_version(&v) => Era::Modern,
            Ok(v) => Era::Unsupported(v.chars().take(64).collect()),
            Err(_) => Era::Unsupported("(not a header value)".into()),
        };
    }
    if session {
        return Era::Session;
    }
    match parsed {
        Parsed::Single(m) if m.method() != Some(mcp::INITIALIZE) && m.claims_modern() => {
            Era::Modern
        }
        _ => Era::Session,
    }
}

/// Answers one POST to an MCP endpoint.
pub(crate) async fn post(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    req: Request<Incoming>,
    who: &Who,
    peer: std::net::IpAddr,
) -> Result<Response<Body>, FrontError> {
    crate::request::check_post_headers(req.headers())?;
    let (parts, body) = req.into_parts();
    let bytes = crate::request::read_body_of(front, &parts.headers, body).await?;
    let parsed = Message::parse_incoming(bytes)?;
    if let Parsed::Single(m) = &parsed
        && let Some(method) = m.method()
    {
        let span = tracing::Span::current();
        span.record("method", method);
        // The tool, prompt or resource: only parsed when the span is exported.
        if !span.is_disabled()
            && let Some(field) = mcpgate_jsonrpc::modern::name_field(method)
            && let Some(name) = m.params_raw(field)
        {
            span.record("name", name.trim_matches('"'));
        }
    }
    match decide(&parts.headers, &parsed) {
        Era::Session => {
            tracing::Span::current().record("era", "2025");
            crate::mcp::post(front, server, &parts.headers, parsed, who).await
        }
        Era::Modern => {
            tracing::Span::current().record("era", "2026");
            crate::modern::post(front, server, &parts.headers, parsed, who, Some(peer)).await
        }
        Era::Unsupported(v) => {
            let id = match &parsed {
                Parsed::Single(m) => m.id().cloned(),
                Parsed::Batch(_) => None,
            };
            tracing::info!(server = %server.name, version = %v, "request at an unsupported protocol version refused");
            Ok(json(
                StatusCode::BAD_REQUEST,
                modern::unsupported_version(&v).to_body(id.as_ref()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::HeaderValue;

    fn parsed(s: &str) -> Parsed {
        Message::parse_incoming(Bytes::copy_from_slice(s.as_bytes())).unwrap()
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn the_era_of_a_post() {
        let call =
            parsed(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#);
        let claimed = parsed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        let init = parsed(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
        assert_eq!(decide(&headers(&[]), &call), Era::Session);
        assert_eq!(
            decide(&headers(&[("mcp-session-id", "s")]), &claimed),
            Era::Session
        );
        assert_eq!(
            decide(&headers(&[("mcp-protocol-version", "2025-06-18")]), &call),
            Era::Session
        );
        assert_eq!(
            decide(&headers(&[("mcp-protocol-version", "2026-07-28")]), &call),
            Era::Modern
        );
        assert_eq!(decide(&headers(&[]), &claimed), Era::Modern);
        assert_eq!(decide(&headers(&[]), &init), Era::Session);
        assert_eq!(
            decide(&headers(&[("mcp-protocol-version", "1999-01-01")]), &call),
            Era::Unsupported("1999-01-01".into())
        );
        assert_eq!(
            decide(&headers(&[("mcp-protocol-version", "2030-01-01")]), &call),
            Era::Unsupported("2030-01-01".into())
        );
    }
}
