//! The MCP 2026-07-28 endpoint (the era decided in `era.rs`): no sessions, every request
//! on its own. The gateway checks the mirrored headers against the body before anything
//! goes upstream, applies authentication and limits per request (there is no session to
//! bind), and forwards the request on its own upstream exchange; the answer — JSON or
//! SSE, `input_required` results, `subscriptions/listen` streams — streams back as the
//! upstream's bytes. A client that closes its stream drops the upstream exchange, which is
//! this revision's cancellation. Nothing is cached. A server that speaks only the session
//! era is reached through the era bridge (`bridge.rs`), unless its `bridge` is off.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use mcpgate_jsonrpc::error::INVALID_REQUEST;
use mcpgate_jsonrpc::{Incoming as Parsed, JsonRpcError, Message, mcp, modern};
use mcpgate_session::{Era, ServerSpec};
use mcpgate_upstream::{ModernRequest, ModernResponse, Target};
use tracing::{debug, info};

use crate::answers::{OnDrop, request_error, status_of};
use crate::body::{Body, json};
use crate::error::FrontError;
use crate::front::Front;
use crate::request::Who;

/// Headers of a client request that go upstream with it (besides the server's own).
fn forwarded(h: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in h {
        let n = name.as_str();
        if n == mcp::PROTOCOL_VERSION_HEADER
            || n == mcp::METHOD_HEADER
            || n == mcp::NAME_HEADER
            || n.starts_with(mcp::PARAM_HEADER_PREFIX)
            || matches!(n, "traceparent" | "tracestate" | "baggage")
        {
            out.append(name.clone(), value.clone());
        }
    }
    // With tracing on, the upstream's parent is the gateway's request span (same trace).
    mcpgate_telemetry::inject(&mut out);
    out
}

/// The mirrored headers, noting one that was sent twice.
fn mirrored(h: &HeaderMap) -> modern::Mirrored<'_> {
    let one = |name: &'static str| {
        let mut all = h.get_all(name).iter();
        let first = all.next().map(HeaderValue::as_bytes);
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
fn refuse(e: &JsonRpcError, msg: &Message, server: &ServerSpec) -> Response<Body> {
    info!(server = %server.name, era = "2026", method = msg.method().unwrap_or(""), code = e.code, error = %e.message, "request refused");
    json(StatusCode::BAD_REQUEST, e.to_body(msg.id()))
}

/// Answers one 2026-07-28 POST.
pub(crate) async fn post(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    h: &HeaderMap,
    parsed: Parsed,
    who: &Who,
    peer: Option<std::net::IpAddr>,
) -> Result<Response<Body>, FrontError> {
    let msg = match parsed {
        Parsed::Single(m) => m,
        Parsed::Batch(_) => {
            return Ok(json(
                StatusCode::BAD_REQUEST,
                JsonRpcError::new(
                    INVALID_REQUEST,
                    "Invalid Request: 2026-07-28 has no batches",
                )
                .to_body(None),
            ));
        }
    };
    if msg.is_response() {
        return Ok(refuse(
            &JsonRpcError::new(
                INVALID_REQUEST,
                "Invalid Request: JSON-RPC responses cannot be posted in 2026-07-28",
            ),
            &msg,
            server,
        ));
    }
    let env = msg.modern_envelope();
    if let Err(e) = modern::check(&msg, &env, &mirrored(h)) {
        return Ok(refuse(&e, &msg, server));
    }
    let key: Arc<str> = match (who, peer) {
        (Some(p), _) => p.clone(),
        (None, Some(ip)) => Arc::from(ip.to_string()),
        (None, None) => Arc::from("-"),
    };
    let Some(slot) = front.inflight.take(key, msg.method() != Some(mcp::LISTEN)) else {
        return Err(FrontError::Session(
            mcpgate_session::SessionError::TooManyInflight,
        ));
    };
    let era = front.table.modern_era(server).await;
    if era == Era::Session || matches!(server.target, Target::LegacySse { .. } | Target::Virtual(_))
    {
        // This server speaks only the session era: the era bridge holds a session for
        // the client; without it, a client that can fall back to `initialize` does so on
        // this error (it lists only session-era versions). A virtual server is a session
        // of member sessions, so it is reached like one.
        if server.bridge {
            return crate::bridge::post(front, server, msg, who, slot).await;
        }
        return Ok(session_only(&msg, server, env.version.as_deref()));
    }
    match &server.target {
        Target::Http { .. } => forward_http(front, server, h, msg, slot).await,
        Target::Stdio { .. } | Target::LegacySse { .. } => {
            leased(front, server, msg, who, slot).await
        }
        Target::Virtual(_) => Ok(session_only(&msg, server, env.version.as_deref())),
    }
}

/// The answer to a 2026-07-28 request for a server that speaks only the session era:
/// `-32022` listing the session-era versions, on which SDK clients fall back to
/// `initialize`.
fn session_only(msg: &Message, server: &ServerSpec, requested: Option<&str>) -> Response<Body> {
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

/// A 2026-07-28 request to a stdio server, on a child leased for it (see the session
/// crate's `pool.rs`): never shared between principals, serving one request at a time.
async fn leased(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    msg: Message,
    who: &Who,
    slot: crate::inflight::Slot,
) -> Result<Response<Body>, FrontError> {
    if !msg.is_request() {
        // A notification (the TypeScript client's cancel of a listen stream): closing the
        // stream already ended that request at the child.
        return Ok(crate::body::status(StatusCode::ACCEPTED));
    }
    let id = msg.id().cloned();
    let method = msg.method().unwrap_or("").to_owned();
    let lease = match front.table.lease(server, who.clone()).await {
        Ok(l) => l,
        Err(mcpgate_session::SessionError::WrongEra) if server.bridge => {
            return crate::bridge::post(front, server, msg, who, slot).await;
        }
        Err(mcpgate_session::SessionError::WrongEra) => {
            return Ok(session_only(&msg, server, None));
        }
        Err(e) => return Ok(request_error(e, id.as_ref(), server, &method)),
    };
    debug!(server = %server.name, era = "2026", method, upstream = lease.upstream_tag(), "leased");
    let table = front.table.clone();
    let started = table.metrics().modern_request();
    let mut ex = match lease.request(msg).await {
        Ok(ex) => ex,
        Err(e) => return Ok(request_error(e, id.as_ref(), server, &method)),
    };
    let first = match ex.next().await {
        Some(Ok(m)) => m,
        Some(Err(e)) => return Ok(request_error(e, id.as_ref(), server, &method)),
        None => {
            return Ok(request_error(
                mcpgate_session::SessionError::Closed,
                id.as_ref(),
                server,
                &method,
            ));
        }
    };
    if first.is_response() {
        table.metrics().observe(&method, "2026", started);
        return Ok(json(status_of(&first), first.into_raw()));
    }
    let every = front.cfg.keep_alive;
    let closing = front.closing.clone();
    let body = async_stream::stream! {
        let _slot = slot;
        let _done = OnDrop::new(move || table.metrics().observe(&method, "2026", started));
        yield Ok::<_, std::convert::Infallible>(Frame::data(mcpgate_jsonrpc::sse::message_event(None, first.raw())));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = closing.cancelled() => break,
                item = ex.next() => match item {
                    Some(Ok(m)) => {
                        yield Ok(Frame::data(mcpgate_jsonrpc::sse::message_event(None, m.raw())));
                        if m.is_response() { break; }
                    }
                    Some(Err(e)) => {
                        let body = FrontError::from(e).to_jsonrpc().to_body(id.as_ref());
                        yield Ok(Frame::data(mcpgate_jsonrpc::sse::message_event(None, &body)));
                        break;
                    }
                    None => break,
                },
                _ = tick.tick() => yield Ok(Frame::data(Bytes::from_static(mcpgate_jsonrpc::sse::KEEP_ALIVE))),
            }
        }
    };
    let mut r = crate::sse::response(StreamBody::new(body).boxed_unsync());
    r.headers_mut().insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    Ok(r)
}

async fn forward_http(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    h: &HeaderMap,
    msg: Message,
    slot: crate::inflight::Slot,
) -> Result<Response<Body>, FrontError> {
    let method = msg.method().unwrap_or("").to_owned();
    let id = msg.id().cloned();
    let table = front.table.clone();
    let started = table.metrics().modern_request();
    let req = ModernRequest {
        body: msg.into_raw(),
        headers: forwarded(h),
    };
    let resp = match front.table.connector().forward(&server.target, req).await {
        Ok(r) => r,
        Err(e) => {
            info!(server = %server.name, era = "2026", method, error = %e, "2026-07-28 request failed upstream");
            return Ok(FrontError::from(mcpgate_session::SessionError::Upstream(e))
                .into_request_answer(id.as_ref()));
        }
    };
    if (400..500).contains(&resp.status) {
        return Ok(client_error(front, server, resp).await);
    }
    debug!(server = %server.name, era = "2026", method, status = resp.status, "2026-07-28 answer");
    // The slot is held until the answer's body ends (a listen stream counts while open).
    Ok(relay(
        resp,
        front.cfg.keep_alive,
        front.closing.clone(),
        move || {
            table.metrics().observe(&method, "2026", started);
            drop(slot);
        },
    ))
}

/// A 4xx answer: read (bounded) and passed on; an answer no 2026-07-28 server gives
/// (a session-era error) means the server's era changed, so it is asked again next time.
async fn client_error(front: &Front, server: &ServerSpec, resp: ModernResponse) -> Response<Body> {
    let status = resp.status;
    let headers = resp.headers.clone();
    let mut body = resp.body;
    let mut all = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        all.extend_from_slice(&chunk);
        if all.len() > 64 * 1024 {
            break;
        }
    }
    let session_era = match serde_json::from_slice::<serde_json::Value>(&all) {
        Ok(v) => {
            v.pointer("/error/code").and_then(serde_json::Value::as_i64)
                == Some(mcpgate_jsonrpc::error::BAD_REQUEST)
        }
        Err(_) => true,
    };
    if session_era {
        front
            .table
            .contradicted(server, "a 2026-07-28 request got a session-era refusal");
    }
    let mut r = Response::new(crate::body::full(Bytes::from(all)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    *r.headers_mut() = headers;
    r
}

/// The upstream's answer as the client's: status, content type, body bytes as they
/// arrive. An SSE answer gets keep-alive comments between events while it is idle, and
/// `X-Accel-Buffering: no`.
fn relay<F>(
    resp: ModernResponse,
    every: Duration,
    closing: tokio_util::sync::CancellationToken,
    done: F,
) -> Response<Body>
where
    F: FnOnce() + Send + 'static,
{
    let sse = resp.is_event_stream();
    let status = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut upstream = resp.body;
    let body = async_stream::stream! {
        let _done = OnDrop::new(done);
        // Whether what was sent so far ends at an event boundary (a blank line), where a
        // keep-alive comment may go.
        let mut at_boundary = true;
        let mut tail = [0u8; 4];
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                // The gateway is shutting down (after in-flight requests had their drain):
                // the stream ends here, and with it the upstream exchange.
                () = closing.cancelled() => break,
                chunk = upstream.next() => match chunk {
                    Some(Ok(b)) => {
                        if b.is_empty() { continue; }
                        if sse {
                            for x in b.iter() {
                                tail = [tail[1], tail[2], tail[3], *x];
                            }
                            at_boundary = tail[2..] == *b"\n\n" || tail == *b"\r\n\r\n";
                        }
                        tick.reset();
                        yield Ok::<_, std::convert::Infallible>(Frame::data(b));
                    }
                    Some(Err(e)) => {
                        debug!(error = %e, "2026-07-28 answer broke off upstream");
                        break;
                    }
                    None => break,
                },
                _ = tick.tick(), if sse && at_boundary => {
                    yield Ok(Frame::data(Bytes::from_static(mcpgate_jsonrpc::sse::KEEP_ALIVE)));
                }
            }
        }
    };
    let mut r = Response::new(StreamBody::new(body).boxed_unsync());
    *r.status_mut() = status;
    *r.headers_mut() = resp.headers;
    if sse {
        r.headers_mut().insert(
            HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        );
        r.headers_mut()
            .entry(header::CACHE_CONTROL)
            .or_insert(HeaderValue::from_static("no-cache"));
    }
    r
}
