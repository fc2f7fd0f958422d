//! The plan of a POST: a value that says what the request will do, decided once from
//! what `classify.rs` read (its era, its message, the session it names) and the server it
//! is for, before anything is executed.
//!
//! What the session's upstream itself is — the server's own session, the era bridge's
//! session in front of a 2026-07-28-only server, a virtual server's members — is the
//! session layer's plan of its opening (`mcpgate_session::Holder`,
//! `mcpgate_compose::Mode`); this plan says how the request is carried to it.

use std::sync::Arc;

use http::{HeaderMap, Response, StatusCode};
use mcpgate_jsonrpc::error::INVALID_REQUEST;
use mcpgate_jsonrpc::{Incoming, JsonRpcError, Message, Method, mcp, modern};
use mcpgate_session::{Era, ServerSpec, Session};
use tracing::info;

use crate::body::{Body, json};
use crate::error::FrontError;
use crate::front::Front;
use crate::inflight::{Key, Permit};
use crate::request::Principal;

/// What a POST will do.
pub(crate) enum Plan {
    /// Session era: open a session (`initialize`).
    Initialize(Message),
    /// Session era: a request or notification on the client's session.
    OnSession(Arc<Session>, Message),
    /// Session era: a batch on the client's session.
    Batch(Arc<Session>, Vec<Message>),
    /// 2026-07-28: one request, carried as `carry` says.
    Stateless(Stateless, Carry),
    /// Answered by the gateway itself, without going upstream.
    Answer(Response<Body>),
}

/// A 2026-07-28 request the gateway accepted.
pub(crate) struct Stateless {
    /// The request.
    pub(crate) msg: Message,
    /// Its place among its principal's requests in flight.
    pub(crate) permit: Permit,
}

/// What the executors of a 2026-07-28 request work with.
#[derive(Clone, Copy)]
pub(crate) struct Cx<'a> {
    pub(crate) front: &'a Arc<Front>,
    pub(crate) server: &'a Arc<ServerSpec>,
    pub(crate) who: &'a Principal,
}

/// How a 2026-07-28 request reaches its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carry {
    /// A Streamable HTTP server of the same era: the request's own exchange.
    Forward,
    /// A stdio server of the same era: its principal's child.
    Lease,
    /// A server that speaks only the session era: a session the gateway holds.
    Bridge,
}

/// The plan of a session-era POST.
pub(crate) fn session_era(
    front: &Front,
    server: &ServerSpec,
    h: &HeaderMap,
    parsed: Incoming,
    who: &Principal,
) -> Result<Plan, FrontError> {
    crate::mcp::check_version(h)?;
    let session = crate::mcp::session_of(front, server, h, who)?;
    let required = FrontError::BadRequest("Mcp-Session-Id header is required");
    let msg = match parsed {
        Incoming::Single(m) => m,
        Incoming::Batch(msgs) => return Ok(Plan::Batch(session.ok_or(required)?, msgs)),
    };
    if msg.is(&Method::Initialize) && msg.is_request() {
        if session.is_some() {
            return Err(FrontError::BadRequest(
                "initialize must not carry an Mcp-Session-Id",
            ));
        }
        return Ok(Plan::Initialize(msg));
    }
    Ok(Plan::OnSession(session.ok_or(required)?, msg))
}

/// The plan of a 2026-07-28 POST: its envelope checked against its mirrored headers, a
/// place among its principal's requests in flight, and the way to its server — by the
/// server's era (configured, learned, or asked now) and transport.
pub(crate) async fn stateless(
    front: &Front,
    server: &ServerSpec,
    h: &HeaderMap,
    parsed: Incoming,
    (who, peer): (&Principal, Option<std::net::IpAddr>),
) -> Result<Plan, FrontError> {
    let msg = match checked(server, h, parsed) {
        Ok(m) => m,
        Err(answer) => return Ok(Plan::Answer(*answer)),
    };
    let key = match (who, peer) {
        (Some(p), _) => Key::Principal(p.clone()),
        (None, Some(ip)) => Key::Addr(ip),
        (None, None) => Key::Unknown,
    };
    let Some(permit) = front.inflight.take(key, !msg.is(&Method::Listen)) else {
        return Err(mcpgate_session::SessionError::TooManyInflight.into());
    };
    let era = front.table.modern_era(server, who.as_deref()).await;
    let carry = match server.backend.target() {
        // A virtual server is a session of member sessions, so it is reached like one.
        _ if era == Era::Session => Carry::Bridge,
        None | Some(mcpgate_upstream::Target::LegacySse { .. }) => Carry::Bridge,
        Some(mcpgate_upstream::Target::Http { .. }) => Carry::Forward,
        Some(mcpgate_upstream::Target::Stdio { .. }) => Carry::Lease,
    };
    if carry == Carry::Bridge && !server.bridge {
        // Without the bridge, a client that can fall back to `initialize` does so on this
        // error (it lists only session-era versions).
        let requested = msg.modern_envelope().version;
        return Ok(Plan::Answer(session_only(
            &msg,
            server,
            requested.as_deref(),
        )));
    }
    if !msg.is_request() && carry != Carry::Forward {
        // A notification (a cancel after the client closed its stream, which already
        // ended that request): nothing to forward.
        return Ok(Plan::Answer(crate::body::status(StatusCode::ACCEPTED)));
    }
    Ok(Plan::Stateless(Stateless { msg, permit }, carry))
}

/// The one message of a 2026-07-28 POST, its envelope agreeing with its mirrored
/// headers; otherwise the answer to the POST (400 with the request's id).
fn checked(
    server: &ServerSpec,
    h: &HeaderMap,
    parsed: Incoming,
) -> Result<Message, Box<Response<Body>>> {
    let msg = match parsed {
        Incoming::Single(m) => m,
        Incoming::Batch(_) => {
            let e = JsonRpcError::new(
                INVALID_REQUEST,
                "Invalid Request: 2026-07-28 has no batches",
            );
            return Err(Box::new(json(StatusCode::BAD_REQUEST, e.to_body(None))));
        }
    };
    if msg.is_response() {
        let e = JsonRpcError::new(
            INVALID_REQUEST,
            "Invalid Request: JSON-RPC responses cannot be posted in 2026-07-28",
        );
        return Err(Box::new(refuse(&e, &msg, server)));
    }
    let env = msg.modern_envelope();
    match modern::check(&msg, &env, &mirrored(h)) {
        Ok(()) => Ok(msg),
        Err(e) => Err(Box::new(refuse(&e, &msg, server))),
    }
}

/// The mirrored headers, noting one that was sent twice.
fn mirrored(h: &HeaderMap) -> modern::Mirrored<'_> {
    let one = |name: &'static str| {
        let mut all = h.get_all(name).iter();
        let first = all.next().map(http::HeaderValue::as_bytes);
        (first, all.next().is_some())
    };
    let (version, dv) = one(mcp::PROTOCOL_VERSION_HEADER);
    let (method, dm) = one(mcp::METHOD_HEADER);
    let (name, dn) = one(mcp::NAME_HEADER);
    let duplicated = match (dv, dm, dn) {
        (true, _, _) => Some("MCP-Protocol-Version"),
        (_, true, _) => Some("Mcp-Method"),
        (_, _, true) => Some("Mcp-Name"),
        _ => None,
    };
    modern::Mirrored {
        version,
        method,
        name,
        duplicated,
    }
}

/// A refusal of a 2026-07-28 request: HTTP 400 with the JSON-RPC error and the request's
/// id.
pub(crate) fn refuse(e: &JsonRpcError, msg: &Message, server: &ServerSpec) -> Response<Body> {
    info!(server = %server.name, era = Era::Modern.as_str(), method = msg.method_name(), code = e.code, error = %e.message, "request refused");
    json(StatusCode::BAD_REQUEST, e.to_body(msg.id()))
}

/// The answer to a 2026-07-28 request for a server that speaks only the session era:
/// `-32022` listing the session-era versions, on which SDK clients fall back to
/// `initialize`.
pub(crate) fn session_only(
    msg: &Message,
    server: &ServerSpec,
    requested: Option<&str>,
) -> Response<Body> {
    let supported: Vec<&str> = mcp::SESSION_PROTOCOL_VERSIONS
        .iter()
        .rev()
        .copied()
        .collect();
    refuse(
        &modern::unsupported_version_among(
            requested.unwrap_or(mcp::MODERN_PROTOCOL_VERSION),
            &supported,
        ),
        msg,
        server,
    )
}
