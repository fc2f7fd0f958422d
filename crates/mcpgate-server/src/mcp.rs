//! The Streamable HTTP endpoint: POST (messages), GET (standalone stream), DELETE.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Response, StatusCode};
use mcpgate_jsonrpc::{Id, Incoming as Body_, Message, mcp};
use mcpgate_session::{CloseReason, ServerSpec, Session, SessionError};
use tracing::{debug, info};

use crate::body::{Body, json, status};
use crate::error::FrontError;
use crate::front::Front;
use crate::request::{Who, accepts, owned_session};
use crate::sse;

fn check_version(headers: &HeaderMap) -> Result<(), FrontError> {
    match headers.get(mcp::PROTOCOL_VERSION_HEADER) {
        None => Ok(()),
        Some(v) => match v.to_str() {
            Ok(s) if mcp::is_session_version(s) => Ok(()),
            Ok(s) => Err(FrontError::UnsupportedVersion(s.chars().take(64).collect())),
            Err(_) => Err(FrontError::UnsupportedVersion("(not visible ASCII)".into())),
        },
    }
}

/// The session named by the request, if it names one. A session of another server, or
/// one opened by another principal, is not found here, exactly like an unknown one.
fn session_of(
    front: &Front,
    server: &ServerSpec,
    headers: &HeaderMap,
    who: &Who,
) -> Result<Option<Arc<Session>>, FrontError> {
    let Some(v) = headers.get(mcp::SESSION_ID_HEADER) else {
        return Ok(None);
    };
    let id = v.to_str().map_err(|_| SessionError::NotFound)?;
    owned_session(front, server, id, who).map(Some)
}

fn require_session(
    front: &Front,
    server: &ServerSpec,
    headers: &HeaderMap,
    who: &Who,
) -> Result<Arc<Session>, FrontError> {
    session_of(front, server, headers, who)?
        .ok_or(FrontError::BadRequest("Mcp-Session-Id header is required"))
}

/// A session-era POST (the era was decided by `era.rs`; its body is already read).
pub(crate) async fn post(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    h: &HeaderMap,
    parsed: Body_,
    who: &Who,
) -> Result<Response<Body>, FrontError> {
    check_version(h)?;
    let priming = sse::wants_priming(h);
    let session = session_of(front, server, h, who)?;
    let msg = match parsed {
        Body_::Single(m) => m,
        Body_::Batch(msgs) => {
            let session =
                session.ok_or(FrontError::BadRequest("Mcp-Session-Id header is required"))?;
            return batch(&session, msgs).await;
        }
    };
    if let Some(m) = msg.method() {
        tracing::Span::current().record("method", m);
    }
    if msg.method() == Some(mcp::INITIALIZE) && msg.is_request() {
        if session.is_some() {
            return Err(FrontError::BadRequest(
                "initialize must not carry an Mcp-Session-Id",
            ));
        }
        return initialize(front, server, msg, who, false).await;
    }
    let session = session.ok_or(FrontError::BadRequest("Mcp-Session-Id header is required"))?;
    if msg.is_request() {
        Ok(request(front, &session, msg, priming).await)
    } else {
        session
            .notify(msg)
            .await
            .map_err(|e| not_found_if_closed(e, &session))?;
        Ok(status(StatusCode::ACCEPTED))
    }
}

/// A sealed session whose upstream session ended (a DELETE through another replica, the
/// upstream's own expiry) is unknown now: the client re-initialises.
fn unknown_if_gone(e: SessionError, session: &Session) -> SessionError {
    match e {
        SessionError::Upstream(mcpgate_upstream::UpstreamError::SessionGone)
            if session.is_sealed() =>
        {
            SessionError::NotFound
        }
        e => e,
    }
}

/// A session that ended while a notification was being sent is reported like an unknown
/// one (and so is a sealed one whose upstream session ended): the client re-initialises.
fn not_found_if_closed(e: SessionError, session: &Session) -> FrontError {
    match unknown_if_gone(e, session) {
        SessionError::Closed => SessionError::NotFound.into(),
        e => e.into(),
    }
}

/// Errors a request can meet after the gateway accepted it become a JSON-RPC error
/// response with the request's id; the others are HTTP refusals.
fn request_failed(e: SessionError, id: Option<&Id>, session: &Session) -> Response<Body> {
    let e = unknown_if_gone(e, session);
    match e {
        SessionError::NotFound
        | SessionError::TooManyInflight
        | SessionError::TooManySessions
        | SessionError::ShuttingDown
        | SessionError::StreamConflict => {
            info!(session = %session.tag(), era = "2025", error = %e, "request refused");
            FrontError::from(e).into_response(id)
        }
        e => {
            info!(session = %session.tag(), era = "2025", id = ?id, error = %e, "request failed");
            FrontError::from(e).into_request_answer(id)
        }
    }
}

async fn request(
    front: &Front,
    session: &Arc<Session>,
    msg: Message,
    priming: bool,
) -> Response<Body> {
    let id = msg.id().cloned();
    let mut ex = match session.request(msg).await {
        Ok(ex) => ex,
        Err(e) => return request_failed(e, id.as_ref(), session),
    };
    match ex.next().await {
        Some(Ok(m)) if m.is_response() => json(StatusCode::OK, m.into_raw()),
        Some(Ok(m)) => sse::response(sse::request_stream(
            session,
            vec![m],
            ex,
            priming,
            front.cfg.keep_alive,
        )),
        Some(Err(e)) => request_failed(e, id.as_ref(), session),
        None => request_failed(SessionError::Closed, id.as_ref(), session),
    }
}

async fn initialize(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    msg: Message,
    who: &Who,
    bridged: bool,
) -> Result<Response<Body>, FrontError> {
    let id = msg.id().cloned();
    let kind = mcpgate_session::FrontKind::StreamableHttp;
    let created = if bridged {
        front.table.create_bridged(server, kind, who.clone()).await
    } else {
        front.table.create(server, kind, who.clone()).await
    };
    // Kept for the era bridge, should the server refuse the session era.
    let again = msg.clone();
    let capabilities = msg.params_raw("capabilities");
    let session = match created {
        Ok(s) => s,
        // The upstream could not be started: a JSON-RPC error for this initialize.
        Err(SessionError::Upstream(u))
            if !matches!(u, mcpgate_upstream::UpstreamError::Capacity(_)) =>
        {
            return Ok(FrontError::from(SessionError::Upstream(u)).into_request_answer(id.as_ref()));
        }
        Err(e) => return Err(e.into()),
    };
    // Whatever ends the session during initialize (its upstream exiting at once, say) is
    // the upstream's failure as far as this client is concerned.
    let fail = |e: SessionError| {
        let close = session.close(CloseReason::InitFailed);
        let session = session.clone();
        async move {
            close.await;
            match e {
                SessionError::NotFound | SessionError::Closed => {
                    SessionError::Upstream(session.upstream_cause().cloned().unwrap_or_else(|| {
                        mcpgate_upstream::UpstreamError::Ended(
                            "it ended before answering initialize".into(),
                        )
                    }))
                }
                e => e,
            }
        }
    };
    let refused = |e: &SessionError| matches!(e, SessionError::Upstream(mcpgate_upstream::UpstreamError::Status(s)) if (400..500).contains(s));
    let mut ex = match session.request(msg).await {
        Ok(ex) => ex,
        Err(e) => {
            let was_refused = refused(&e);
            let e = fail(e).await;
            if was_refused && !bridged && bridgeable(front, server).await {
                return Box::pin(initialize(front, server, again, who, true)).await;
            }
            return Ok(FrontError::from(e).into_request_answer(id.as_ref()));
        }
    };
    let mut got = Vec::new();
    loop {
        match ex.next().await {
            Some(Ok(m)) => {
                let last = m.is_response();
                got.push(m);
                if last {
                    break;
                }
            }
            Some(Err(e)) => {
                let was_refused = refused(&e);
                let e = fail(e).await;
                if was_refused && !bridged && bridgeable(front, server).await {
                    drop(ex);
                    return Box::pin(initialize(front, server, again, who, true)).await;
                }
                return Ok(FrontError::from(e).into_request_answer(id.as_ref()));
            }
            None => break,
        }
    }
    let accepted = got
        .last()
        .is_some_and(|m| m.is_response() && m.result_str("protocolVersion").is_some());
    if !accepted {
        // The upstream refused initialize: hand its answer over, keep no session.
        drop(ex);
        fail(SessionError::Closed).await;
        debug!(server = %server.name, "upstream refused initialize");
        // A server that speaks only 2026-07-28: the era bridge holds the session.
        if !bridged && bridgeable(front, server).await {
            return Box::pin(initialize(front, server, again, who, true)).await;
        }
        return Ok(match got.pop() {
            Some(m) if m.is_response() => json(StatusCode::OK, m.into_raw()),
            _ => FrontError::from(SessionError::Upstream(
                mcpgate_upstream::UpstreamError::Protocol("no initialize response".into()),
            ))
            .into_request_answer(id.as_ref()),
        });
    }
    let mut resp = if got.len() == 1 {
        let m = got.pop().map(Message::into_raw).unwrap_or_default();
        json(StatusCode::OK, m)
    } else {
        sse::response(sse::request_stream(
            &session,
            got,
            ex,
            false,
            front.cfg.keep_alive,
        ))
    };
    // A session any replica can serve gets its sealed id.
    front.table.seal(&session, capabilities.as_deref());
    let sid = HeaderValue::from_str(session.client_id())
        .map_err(|_| FrontError::BadRequest("session id"))?;
    resp.headers_mut().insert(mcp::SESSION_ID_HEADER, sid);
    Ok(resp)
}

/// Whether a server that refused `initialize` speaks only 2026-07-28, so that the era
/// bridge holds the session-era client's session (HTTP servers, `bridge` on).
async fn bridgeable(front: &Front, server: &ServerSpec) -> bool {
    let yes = server.bridge
        && matches!(server.target, mcpgate_upstream::Target::Http { .. })
        && front.table.modern_era(server).await == mcpgate_session::Era::Modern;
    if yes {
        info!(server = %server.name, "the server refused the session era: bridging the session-era client to 2026-07-28");
    }
    yes
}

/// A JSON-RPC batch (protocol 2025-03-26 requires servers to accept them). Each message
/// is forwarded on its own (newer upstreams do not accept batches); the answer is one
/// JSON array with a response per request, or 202 when the batch held no request.
/// Messages the upstream relates to a request of the batch go to the session's other
/// streams (GET stream, backlog), since a JSON array can only carry responses.
async fn batch(session: &Arc<Session>, msgs: Vec<Message>) -> Result<Response<Body>, FrontError> {
    if msgs.iter().any(|m| m.method() == Some(mcp::INITIALIZE)) {
        return Err(FrontError::BadRequest(
            "initialize must not be part of a batch",
        ));
    }
    let mut requests = Vec::new();
    for m in msgs {
        if m.is_request() {
            requests.push(m);
        } else {
            session
                .notify(m)
                .await
                .map_err(|e| not_found_if_closed(e, session))?;
        }
    }
    if requests.is_empty() {
        return Ok(status(StatusCode::ACCEPTED));
    }
    let answers = futures::future::join_all(requests.into_iter().map(|m| async move {
        let id = m.id().cloned();
        let mut ex = match session.request(m).await {
            Ok(ex) => ex,
            Err(e) => return FrontError::from(e).to_jsonrpc().to_body(id.as_ref()),
        };
        while let Some(item) = ex.next().await {
            match item {
                Ok(m) if m.is_response() => return m.into_raw(),
                Ok(m) => session.deliver(m),
                Err(e) => return FrontError::from(e).to_jsonrpc().to_body(id.as_ref()),
            }
        }
        FrontError::from(SessionError::Closed)
            .to_jsonrpc()
            .to_body(id.as_ref())
    }))
    .await;
    let mut out = Vec::with_capacity(answers.iter().map(|a| a.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, a) in answers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(a);
    }
    out.push(b']');
    Ok(json(StatusCode::OK, out))
}

pub(crate) async fn get(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    h: &HeaderMap,
    who: &Who,
    legacy_prefix: Option<&str>,
) -> Result<Response<Body>, FrontError> {
    if !accepts(h, "text/event-stream") {
        return Err(FrontError::NotAcceptable(
            "Accept must list text/event-stream",
        ));
    }
    check_version(h)?;
    // A GET without a session on the MCP endpoint is a legacy HTTP+SSE client (protocol
    // 2024-11-05) probing, as the 2025-03-26 backwards-compatibility rules describe: it
    // gets the legacy stream, whose `endpoint` event names where to POST.
    if let Some(prefix) = legacy_prefix
        && !h.contains_key(mcp::SESSION_ID_HEADER)
    {
        info!(server = %server.name, "GET without a session on the MCP endpoint: serving the legacy HTTP+SSE transport");
        let message_path = format!("{prefix}/message");
        return crate::legacy::open(front, server, h, &message_path, who).await;
    }
    let session = require_session(front, server, h, who)?;
    let priming = sse::wants_priming(h);
    let every = front.cfg.keep_alive;
    let last = h
        .get(mcp::LAST_EVENT_ID_HEADER)
        .and_then(|v| v.to_str().ok());
    // A sealed session's standalone events carry the upstream's event ids (`u:…`): the
    // upstream resumes its stream after it, whichever replica the client was on before.
    if let Some(up) = last.and_then(|l| l.strip_prefix(sse::UPSTREAM_EVENT))
        && session.is_sealed()
    {
        let listener = session.listen_after(up.to_owned())?;
        let log = session.standalone_log().ok_or(SessionError::Closed)?;
        debug!(session = %session.tag(), "resuming the upstream's standalone stream");
        return Ok(sse::response(sse::listener_body(
            listener,
            log,
            None,
            false,
            every,
            session.sse_stream(),
        )));
    }
    let resume = last.and_then(mcpgate_session::parse_event_id);
    match resume {
        // Resuming a request's stream: replay what followed, then the rest as it comes.
        Some((stream, seq)) if stream > 0 => {
            if let Some(log) = session.stream_log(stream) {
                debug!(session = %session.tag(), stream, seq, "resuming a request stream");
                return Ok(sse::response(sse::log_body(
                    log,
                    seq + 1,
                    false,
                    every,
                    session.sse_stream(),
                )));
            }
            debug!(session = %session.tag(), stream, "resume of an unknown stream; serving the standalone stream");
        }
        // Resuming the standalone stream: this connection takes over from the old one.
        Some((0, seq)) => {
            let listener = session.listen(true)?;
            let log = session.standalone_log().ok_or(SessionError::Closed)?;
            debug!(session = %session.tag(), seq, "resuming the standalone stream");
            return Ok(sse::response(sse::listener_body(
                listener,
                log,
                Some(seq + 1),
                false,
                every,
                session.sse_stream(),
            )));
        }
        _ => {}
    }
    let listener = session.listen(false)?;
    let log = session.standalone_log().ok_or(SessionError::Closed)?;
    debug!(session = %session.tag(), "GET stream opened");
    Ok(sse::response(sse::listener_body(
        listener,
        log,
        None,
        priming,
        every,
        session.sse_stream(),
    )))
}

pub(crate) async fn delete(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    h: &HeaderMap,
    who: &Who,
) -> Result<Response<Body>, FrontError> {
    check_version(h)?;
    let session = require_session(front, server, h, who)?;
    session.close(CloseReason::ClientDelete).await;
    Ok(status(StatusCode::OK))
}
