//! The Streamable HTTP endpoint: POST (messages), GET (standalone stream), DELETE.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Response, StatusCode};
use mcpgate_jsonrpc::{Id, Message, Method, mcp};
use mcpgate_session::{CloseReason, Holder, ServerSpec, Session, SessionError};
use mcpgate_upstream::{ProtocolError, UpstreamError};
use tracing::{debug, info};

use crate::body::{Body, json, status};
use crate::error::{At, FrontError, failed};
use crate::front::Front;
use crate::request::{Principal, accepts, owned_session};
use crate::sse;

pub(crate) fn check_version(headers: &HeaderMap) -> Result<(), FrontError> {
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
pub(crate) fn session_of(
    front: &Front,
    server: &ServerSpec,
    headers: &HeaderMap,
    who: &Principal,
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
    who: &Principal,
) -> Result<Arc<Session>, FrontError> {
    session_of(front, server, headers, who)?
        .ok_or(FrontError::BadRequest("Mcp-Session-Id header is required"))
}

/// A request or notification on the client's session.
pub(crate) async fn on_session(
    front: &Front,
    session: &Arc<Session>,
    msg: Message,
    priming: bool,
) -> Result<Response<Body>, FrontError> {
    if msg.is_request() {
        return Ok(request(front, session, msg, priming).await);
    }
    session
        .notify(msg)
        .await
        .map_err(|e| not_found_if_closed(e, session))?;
    Ok(status(StatusCode::ACCEPTED))
}

/// A sealed session whose upstream session ended (a DELETE through another replica, the
/// upstream's own expiry) is unknown now: the client re-initialises.
fn unknown_if_gone(e: SessionError, session: &Session) -> SessionError {
    match e {
        SessionError::Upstream(UpstreamError::SessionGone) if session.is_sealed() => {
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

/// The answer to a request on `session` that failed after the gateway accepted it.
fn request_failed(
    e: SessionError,
    id: Option<&Id>,
    session: &Session,
    method: &str,
) -> Response<Body> {
    let at = At {
        server: session.server(),
        era: mcpgate_session::Era::Session,
        method,
        session: Some(session.tag()),
    };
    failed(unknown_if_gone(e, session), id, at)
}

async fn request(
    front: &Front,
    session: &Arc<Session>,
    msg: Message,
    priming: bool,
) -> Response<Body> {
    let id = msg.id().cloned();
    let method = msg.method().cloned();
    let method = method.as_ref().map_or("", Method::as_str);
    let mut ex = match session.request(msg).await {
        Ok(ex) => ex,
        Err(e) => return request_failed(e, id.as_ref(), session, method),
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
        Some(Err(e)) => request_failed(e, id.as_ref(), session, method),
        None => request_failed(SessionError::Closed, id.as_ref(), session, method),
    }
}

/// `initialize`: a new session. The plan is the server's own session; when the server
/// refuses it and speaks only 2026-07-28 (`bridgeable`), the next is a session the gateway
/// holds in front of it (the era bridge).
pub(crate) async fn initialize(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    msg: Message,
    who: &Principal,
) -> Result<Response<Body>, FrontError> {
    match open(front, server, msg.clone(), who, Holder::Server).await? {
        Opened::Refused(_) if bridgeable(front, server, who.as_deref()).await => {
            Ok(open(front, server, msg, who, Holder::Gateway)
                .await?
                .into_response())
        }
        opened => Ok(opened.into_response()),
    }
}

/// What opening a session gave.
enum Opened {
    /// The answer to `initialize` (a session, or why there is none).
    Answer(Response<Body>),
    /// The upstream refused the session era (an HTTP 4xx, or an answer that is not an
    /// `InitializeResult`): the answer to give if nothing else is tried.
    Refused(Response<Body>),
}

impl Opened {
    fn into_response(self) -> Response<Body> {
        match self {
            Opened::Answer(r) | Opened::Refused(r) => r,
        }
    }
}

/// Opens a session held as `holder` says and sends it the client's `initialize`.
async fn open(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    msg: Message,
    who: &Principal,
    holder: Holder,
) -> Result<Opened, FrontError> {
    let id = msg.id().cloned();
    let kind = mcpgate_session::FrontKind::StreamableHttp;
    let capabilities = msg.params_raw("capabilities");
    let session = match front.table.create(server, kind, who.clone(), holder).await {
        Ok(s) => s,
        // The upstream could not be started: a JSON-RPC error for this initialize.
        Err(SessionError::Upstream(u)) if !matches!(u, UpstreamError::Capacity(_)) => {
            let e = FrontError::from(SessionError::Upstream(u));
            return Ok(Opened::Answer(e.into_request_answer(id.as_ref())));
        }
        Err(e) => return Err(e.into()),
    };
    let got = match handshake(&session, msg).await {
        Ok(got) => got,
        Err(e) => {
            let refused = matches!(&e, SessionError::Upstream(UpstreamError::Status(s)) if (400..500).contains(s));
            let answer =
                FrontError::from(init_failed(&session, e).await).into_request_answer(id.as_ref());
            return Ok(if refused {
                Opened::Refused(answer)
            } else {
                Opened::Answer(answer)
            });
        }
    };
    let Handshake { mut got, ex } = got;
    let accepted = got
        .last()
        .is_some_and(|m| m.is_response() && m.result_str("protocolVersion").is_some());
    if !accepted {
        // The upstream refused initialize: hand its answer over, keep no session.
        drop(ex);
        init_failed(&session, SessionError::Closed).await;
        debug!(server = %server.name, "upstream refused initialize");
        return Ok(Opened::Refused(match got.pop() {
            Some(m) if m.is_response() => json(StatusCode::OK, m.into_raw()),
            _ => FrontError::from(SessionError::Upstream(ProtocolError::NoResponse.into()))
                .into_request_answer(id.as_ref()),
        }));
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
    Ok(Opened::Answer(resp))
}

/// What the upstream answered `initialize` with, up to its response, and the exchange
/// (an SSE answer may go on).
struct Handshake {
    got: Vec<Message>,
    ex: mcpgate_session::Exchange,
}

async fn handshake(session: &Arc<Session>, msg: Message) -> Result<Handshake, SessionError> {
    let mut ex = session.request(msg).await?;
    let mut got = Vec::new();
    while let Some(m) = ex.next().await {
        let m = m?;
        let last = m.is_response();
        got.push(m);
        if last {
            break;
        }
    }
    Ok(Handshake { got, ex })
}

/// Ends a session whose `initialize` failed; whatever ended it meanwhile (its upstream
/// exiting at once, say) is the upstream's failure as far as its client is concerned.
async fn init_failed(session: &Arc<Session>, e: SessionError) -> SessionError {
    session.close(CloseReason::InitFailed).await;
    session.init_failure(e)
}

/// Whether a server that refused `initialize` speaks only 2026-07-28, so that the era
/// bridge holds the session-era client's session (HTTP servers, `bridge` on).
async fn bridgeable(front: &Front, server: &ServerSpec, who: Option<&str>) -> bool {
    let yes = server.bridge
        && server.backend.is_http()
        && front.table.modern_era(server, who).await == mcpgate_session::Era::Modern;
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
pub(crate) async fn batch(
    session: &Arc<Session>,
    msgs: Vec<Message>,
) -> Result<Response<Body>, FrontError> {
    if msgs.iter().any(|m| m.is(&Method::Initialize)) {
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
    who: &Principal,
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
    if let Some(resumed) = last.and_then(|l| resume(&session, l, every)) {
        return resumed;
    }
    let listener = session.listen(false)?;
    let log = session.standalone_log().ok_or(SessionError::Closed)?;
    debug!(session = %session.tag(), "GET stream opened");
    let out = sse::Out::of(&session, every, priming);
    Ok(sse::response(sse::listener_body(listener, log, None, out)))
}

/// A GET with `Last-Event-ID: last`: the stream it names, resumed after that event —
/// `None` when it names nothing this session can resume (the client gets the standalone
/// stream afresh).
fn resume(
    session: &Arc<Session>,
    last: &str,
    every: std::time::Duration,
) -> Option<Result<Response<Body>, FrontError>> {
    // A sealed session's standalone events carry the upstream's event ids (`u:…`): the
    // upstream resumes its stream after it, whichever replica the client was on before.
    if let Some(up) = last.strip_prefix(sse::UPSTREAM_EVENT)
        && session.is_sealed()
    {
        debug!(session = %session.tag(), "resuming the upstream's standalone stream");
        let listener = session.listen_after(up.to_owned());
        return Some(standalone(session, listener, None, every));
    }
    match mcpgate_session::parse_event_id(last)? {
        // Resuming a request's stream: replay what followed, then the rest as it comes.
        (stream, seq) if stream > 0 => {
            let Some(log) = session.stream_log(stream) else {
                debug!(session = %session.tag(), stream, "resume of an unknown stream; serving the standalone stream");
                return None;
            };
            debug!(session = %session.tag(), stream, seq, "resuming a request stream");
            let body = sse::log_body(log, seq + 1, sse::Out::of(session, every, false));
            Some(Ok(sse::response(body)))
        }
        // Resuming the standalone stream: this connection takes over from the old one.
        (_, seq) => {
            debug!(session = %session.tag(), seq, "resuming the standalone stream");
            Some(standalone(
                session,
                session.listen(true),
                Some(seq + 1),
                every,
            ))
        }
    }
}

/// The standalone stream on `listener`, replaying from `from` when resumed.
fn standalone(
    session: &Arc<Session>,
    listener: Result<mcpgate_session::Listener, SessionError>,
    from: Option<u64>,
    every: std::time::Duration,
) -> Result<Response<Body>, FrontError> {
    let listener = listener?;
    let log = session.standalone_log().ok_or(SessionError::Closed)?;
    let out = sse::Out::of(session, every, false);
    Ok(sse::response(sse::listener_body(listener, log, from, out)))
}

pub(crate) async fn delete(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    h: &HeaderMap,
    who: &Principal,
) -> Result<Response<Body>, FrontError> {
    check_version(h)?;
    let session = require_session(front, server, h, who)?;
    session.close(CloseReason::ClientDelete).await;
    Ok(status(StatusCode::OK))
}
