//! MCP 2026-07-28 requests of the same era as their server (the plan's `Forward` and
//! `Lease`): no sessions, every request on its own. Toward HTTP, the request goes on its
//! own upstream exchange and the answer — JSON or SSE, `input_required` results,
//! `subscriptions/listen` streams — streams back as the upstream's bytes; a client that
//! closes its stream drops the upstream exchange, which is this revision's cancellation.
//! Toward stdio, it goes through its principal's child (the session crate's
//! `children.rs`). Nothing is cached. A server that turns out to speak only the session
//! era is reached through the era bridge (`bridge.rs`), unless its `bridge` is off.

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Response, StatusCode};
use mcpgate_jsonrpc::{mcp, sse};
use mcpgate_session::{Era, ServerSpec, SessionError};
use mcpgate_upstream::{ModernRequest, ModernResponse};
use tracing::debug;

use crate::body::{Body, json};
use crate::error::{At, FrontError, failed, status_of};
use crate::front::Front;
use crate::plan::{Cx, Stateless};
use crate::pump::{OnDrop, Pump};

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

/// A 2026-07-28 request to a stdio server, on the child leased for its principal (see
/// the session crate's `children.rs`): never shared between principals.
pub(crate) async fn leased(cx: Cx<'_>, req: Stateless) -> Response<Body> {
    let (Cx { front, server, who }, Stateless { msg, permit }) = (cx, req);
    let id = msg.id().cloned();
    let method = msg.method_name().to_owned();
    let lease = match front.table.lease(server, who.clone()).await {
        Ok(l) => l,
        Err(SessionError::WrongEra) if server.bridge => {
            return crate::bridge::post(cx, Stateless { msg, permit }).await;
        }
        Err(SessionError::WrongEra) => return crate::plan::session_only(&msg, server, None),
        Err(e) => return failed(e, id.as_ref(), At::named(server, &method)),
    };
    debug!(server = %server.name, era = Era::Modern.as_str(), method, upstream = lease.upstream_tag(), "leased");
    let table = front.table.clone();
    let started = table.metrics().modern_request();
    let mut ex = match lease.request(msg).await {
        Ok(ex) => ex,
        Err(e) => return failed(e, id.as_ref(), At::named(server, &method)),
    };
    let first = match ex.next().await {
        Some(Ok(m)) => m,
        Some(Err(e)) => return failed(e, id.as_ref(), At::named(server, &method)),
        None => {
            return failed(
                SessionError::Closed,
                id.as_ref(),
                At::named(server, &method),
            );
        }
    };
    if first.is_response() {
        table.metrics().observe(&method, Era::Modern, started);
        return json(status_of(&first), first.into_raw());
    }
    let events = async_stream::stream! {
        let _permit = permit;
        let _done = OnDrop::new(move || table.metrics().observe(&method, Era::Modern, started));
        yield sse::message_event(None, first.raw());
        while let Some(item) = ex.next().await {
            match item {
                Ok(m) => {
                    yield sse::message_event(None, m.raw());
                    if m.is_response() {
                        break;
                    }
                }
                Err(e) => {
                    let body = FrontError::from(e).to_jsonrpc().to_body(id.as_ref());
                    yield sse::message_event(None, &body);
                    break;
                }
            }
        }
    };
    let pump = Pump::every(front.cfg.keep_alive).until(front.closing.clone());
    crate::sse::response(pump.body(events))
}

/// A 2026-07-28 request to a Streamable HTTP server of the same era, on its own exchange.
pub(crate) async fn forward(cx: Cx<'_>, h: &HeaderMap, req: Stateless) -> Response<Body> {
    let (Cx { front, server, who }, Stateless { msg, permit }) = (cx, req);
    let method = msg.method_name().to_owned();
    let id = msg.id().cloned();
    let table = front.table.clone();
    let started = table.metrics().modern_request();
    let req = ModernRequest {
        body: msg.into_raw(),
        headers: forwarded(h),
    };
    let resp = match front.table.forward(server, req, who.as_deref()).await {
        Ok(r) => r,
        Err(e) => {
            let at = crate::error::At::named(server, &method);
            return crate::error::failed(e, id.as_ref(), at);
        }
    };
    if (400..500).contains(&resp.status) {
        return client_error(front, server, resp).await;
    }
    debug!(server = %server.name, era = Era::Modern.as_str(), method, status = resp.status, "2026-07-28 answer");
    // The permit is held until the answer's body ends (a listen stream counts while open).
    relay(front, resp, move || {
        table.metrics().observe(&method, Era::Modern, started);
        drop(permit);
    })
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
/// arrive (an SSE answer kept alive while idle, ended by the drain). `done` runs when the
/// body ends, however it ends.
fn relay<F>(front: &Front, resp: ModernResponse, done: F) -> Response<Body>
where
    F: FnOnce() + Send + 'static,
{
    let sse = resp.is_event_stream();
    let status = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut upstream = resp.body;
    let bytes = async_stream::stream! {
        let _done = OnDrop::new(done);
        while let Some(chunk) = upstream.next().await {
            match chunk {
                Ok(b) => yield b,
                Err(e) => {
                    debug!(error = %e, "2026-07-28 answer broke off upstream");
                    break;
                }
            }
        }
    };
    let mut pump = Pump::default().until(front.closing.clone());
    if sse {
        pump.every = Some(front.cfg.keep_alive);
    }
    let mut r = Response::new(pump.body(bytes));
    *r.status_mut() = status;
    *r.headers_mut() = resp.headers;
    if sse {
        crate::body::no_buffering(r.headers_mut());
    }
    r
}
