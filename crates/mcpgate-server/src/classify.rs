//! The MCP endpoint's classify phase: the request's HTTP method, and for a POST its body
//! read once and its protocol era decided once — then `plan.rs` says what it will do, and
//! the plan is executed (`mcp.rs`: sessions; `modern.rs`, `bridge.rs`: 2026-07-28).
//!
//! The rule (the issue's, and the spec's "Backward Compatibility"): a request naming an
//! `Mcp-Session-Id` is a session-era request; so is `initialize`, and a request whose
//! `MCP-Protocol-Version` is a session-era version or absent. A request whose header names
//! 2026-07-28 (or, without a header, whose body claims it in `_meta`) is a modern request.
//! A version mcpgate does not speak gets `-32022` with the versions it does and the
//! request's id.

use std::sync::Arc;

use crate::body::ReqBody;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use mcpgate_jsonrpc::{Incoming as Parsed, Message, mcp, modern};
use mcpgate_session::{Era, ServerSpec};
use tracing::{Instrument, info};

use crate::body::{Body, json};
use crate::error::FrontError;
use crate::front::Front;
use crate::plan::{Carry, Cx, Plan};
use crate::request::Principal;

/// A protocol version mcpgate does not speak (as the request named it, cut to 64
/// characters).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unsupported(String);

/// The era of one POST, or the version it names that mcpgate does not speak.
type Decided = Result<Era, Unsupported>;

/// Answers one request to an MCP endpoint.
pub(crate) async fn handle(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    req: Request<ReqBody>,
    who: &Principal,
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
        info!(server = %server.name, %method, era = Era::Session.as_str(), error = %e, "request refused");
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
pub(crate) fn decide(h: &HeaderMap, parsed: &Parsed) -> Decided {
    let session = h.contains_key(mcp::SESSION_ID_HEADER);
    if let Some(v) = h.get(mcp::PROTOCOL_VERSION_HEADER) {
        return match modern::header_value(v.as_bytes()) {
            Ok(v) if mcp::is_session_version(&v) => Ok(Era::Session),
            Ok(_) if session => Ok(Era::Session),
            Ok(v) if mcp::is_modern_version(&v) && mcp::is_supported_version(&v) => Ok(Era::Modern),
            Ok(v) => Err(Unsupported(v.chars().take(64).collect())),
            Err(_) => Err(Unsupported("(not a header value)".into())),
        };
    }
    if session {
        return Ok(Era::Session);
    }
    match parsed {
        Parsed::Single(m) if !m.is(&mcpgate_jsonrpc::Method::Initialize) && m.claims_modern() => {
            Ok(Era::Modern)
        }
        _ => Ok(Era::Session),
    }
}

/// Answers one POST to an MCP endpoint.
pub(crate) async fn post(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    req: Request<ReqBody>,
    who: &Principal,
    peer: std::net::IpAddr,
) -> Result<Response<Body>, FrontError> {
    crate::request::check_post_headers(req.headers())?;
    let (parts, body) = req.into_parts();
    let bytes = crate::request::read_body_of(front, body)?;
    let parsed = Message::parse_incoming(bytes)?;
    if let Parsed::Single(m) = &parsed
        && let Some(method) = m.method()
    {
        let span = tracing::Span::current();
        span.record("method", method.as_str());
        // The tool, prompt or resource: only parsed when the span is exported.
        if !span.is_disabled()
            && let Some(field) = method.name_field()
            && let Some(name) = m.params_raw(field)
        {
            span.record("name", name.trim_matches('"'));
        }
    }
    let plan = match decide(&parts.headers, &parsed) {
        Ok(era) => {
            tracing::Span::current().record("era", era.as_str());
            match era {
                Era::Modern => {
                    let peer = (who, Some(peer));
                    crate::plan::stateless(front, server, &parts.headers, parsed, peer).await?
                }
                _ => crate::plan::session_era(front, server, &parts.headers, parsed, who)?,
            }
        }
        Err(Unsupported(v)) => {
            let id = match &parsed {
                Parsed::Single(m) => m.id().cloned(),
                Parsed::Batch(_) => None,
            };
            tracing::info!(server = %server.name, version = %v, "request at an unsupported protocol version refused");
            Plan::Answer(json(
                StatusCode::BAD_REQUEST,
                modern::unsupported_version(&v).to_body(id.as_ref()),
            ))
        }
    };
    execute(front, server, &parts.headers, plan, who).await
}

/// Executes a POST's plan.
async fn execute(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    h: &HeaderMap,
    plan: Plan,
    who: &Principal,
) -> Result<Response<Body>, FrontError> {
    Ok(match plan {
        Plan::Answer(r) => r,
        Plan::Initialize(msg) => crate::mcp::initialize(front, server, msg, who).await?,
        Plan::OnSession(session, msg) => {
            crate::mcp::on_session(front, &session, msg, crate::sse::wants_priming(h)).await?
        }
        Plan::Batch(session, msgs) => crate::mcp::batch(&session, msgs).await?,
        Plan::Stateless(req, carry) => {
            let cx = Cx { front, server, who };
            match carry {
                Carry::Forward => crate::modern::forward(cx, h, req).await,
                Carry::Lease => crate::modern::leased(cx, req).await,
                Carry::Bridge => crate::bridge::post(cx, req).await,
            }
        }
    })
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
        assert_eq!(decide(&headers(&[]), &call), Ok(Era::Session));
        assert_eq!(
            decide(&headers(&[("mcp-session-id", "s")]), &claimed),
            Ok(Era::Session)
        );
        assert_eq!(
            decide(&headers(&[("mcp-protocol-version", "2025-06-18")]), &call),
            Ok(Era::Session)
        );
        assert_eq!(
            decide(&headers(&[("mcp-protocol-version", "2026-07-28")]), &call),
            Ok(Era::Modern)
        );
        assert_eq!(decide(&headers(&[]), &claimed), Ok(Era::Modern));
        assert_eq!(decide(&headers(&[]), &init), Ok(Era::Session));
        assert_eq!(
            decide(&headers(&[("mcp-protocol-version", "1999-01-01")]), &call),
            Err(Unsupported("1999-01-01".into()))
        );
        assert_eq!(
            decide(&headers(&[("mcp-protocol-version", "2030-01-01")]), &call),
            Err(Unsupported("2030-01-01".into()))
        );
    }
}
