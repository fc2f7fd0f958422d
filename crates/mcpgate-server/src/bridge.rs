//! The era bridge at the front: a 2026-07-28 request for a server that speaks only the
//! session era runs on an upstream session the gateway holds for the client (the session
//! crate's `bridged.rs` pool, leased to this one request), translated both ways by the
//! `mcpgate-bridge` crate. `server/discover` is answered from the pooled session's
//! `InitializeResult`; `_meta.logLevel` becomes `logging/setLevel` on the session; the
//! answer gains `resultType`; progress (and the logs asked for) stream on the request's
//! SSE answer; a server `ping` is answered here. A client that closes its stream before
//! the answer cancels the request upstream (`notifications/cancelled`) before the session
//! goes back to the pool.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use mcpgate_bridge::{ClientMeta, Disposition, disposition};
use mcpgate_jsonrpc::error::METHOD_NOT_FOUND;
use mcpgate_jsonrpc::{Id, JsonRpcError, Message, mcp};
use mcpgate_session::{BridgeLease, ServerSpec, SessionError};
use serde_json::json;
use tracing::{debug, info};

use crate::answers::{OnDrop, request_error, status_of};
use crate::body::{Body, json};
use crate::error::FrontError;
use crate::front::Front;
use crate::inflight::Slot;
use crate::request::Who;

/// Methods a 2026-07-28 server does not have (session state there, or not bridged).
const NOT_MODERN: &[&str] = &[
    mcp::INITIALIZE,
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Answers one 2026-07-28 request on a pooled session-era upstream session.
pub(crate) async fn post(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    msg: Message,
    who: &Who,
    slot: Slot,
) -> Result<Response<Body>, FrontError> {
    if !msg.is_request() {
        // A notification (a cancel after the client closed its stream, which already
        // cancelled the request): nothing to forward.
        return Ok(crate::body::status(StatusCode::ACCEPTED));
    }
    let id = msg.id().cloned();
    let method = msg.method().unwrap_or("").to_owned();
    if NOT_MODERN.contains(&method.as_str()) || method == mcp::LISTEN {
        let why = if method == mcp::LISTEN {
            "Method not found: subscriptions/listen is not bridged to a session-era server yet"
        } else {
            "Method not found in protocol revision 2026-07-28"
        };
        info!(server = %server.name, era = "2026", method, "bridge: method not in 2026-07-28");
        return Ok(json(
            StatusCode::NOT_FOUND,
            JsonRpcError::new(METHOD_NOT_FOUND, why).to_body(id.as_ref()),
        ));
    }
    let meta = ClientMeta::of(&msg);
    let lease = match front.bridges.lease(server, who.clone(), &meta).await {
        Ok(l) => l,
        Err(e) => return Ok(request_error(e, id.as_ref(), server, &method)),
    };
    debug!(server = %server.name, era = "2026", method, session = %lease.session().tag(), "bridged");
    if method == mcp::DISCOVER {
        let rid = id.clone().unwrap_or_else(|| Id::number(0));
        return Ok(match mcpgate_bridge::discover(&rid, lease.init()) {
            Ok(b) => json(StatusCode::OK, b),
            Err(e) => bridge_error(&e, id.as_ref(), server, &method),
        });
    }
    let wants_logs = match meta.log_level.as_deref() {
        Some(level) if has_logging(lease.init()) => {
            if let Err(e) = lease.set_level(level).await {
                return Ok(request_error(e, id.as_ref(), server, &method));
            }
            true
        }
        _ => false,
    };
    let up = match mcpgate_bridge::to_session_request(&msg) {
        Ok(m) => m,
        Err(e) => return Ok(bridge_error(&e, id.as_ref(), server, &method)),
    };
    let table = front.table.clone();
    let started = table.metrics().modern_request();
    let mut ex = match lease.session().request(up).await {
        Ok(ex) => ex,
        Err(e) => return Ok(request_error(e, id.as_ref(), server, &method)),
    };
    // Until something must stream, the answer can still be one JSON body.
    let first = loop {
        let m = match ex.next().await {
            Some(Ok(m)) => m,
            Some(Err(e)) => return Ok(request_error(e, id.as_ref(), server, &method)),
            None => {
                return Ok(request_error(
                    SessionError::Closed,
                    id.as_ref(),
                    server,
                    &method,
                ));
            }
        };
        match disposition(&m, wants_logs) {
            Disposition::Answer => {
                table.metrics().observe(&method, "2026", started);
                let out = mcpgate_bridge::to_modern_answer(&m, &method, lease.server_info());
                let status = Message::parse(out.clone()).map_or(StatusCode::OK, |a| status_of(&a));
                return Ok(json(status, out));
            }
            Disposition::Forward => break m,
            other => server_message(&lease, &m, other).await,
        }
    };
    let every = front.cfg.keep_alive;
    let closing = front.closing.clone();
    let body = async_stream::stream! {
        let _slot = slot;
        let mut held = Held { lease: Some(lease), id, answered: false, method: method.clone() };
        let _done = OnDrop::new(move || table.metrics().observe(&method, "2026", started));
        yield Ok::<_, std::convert::Infallible>(Frame::data(mcpgate_jsonrpc::sse::message_event(None, first.raw())));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = closing.cancelled() => break,
                item = ex.next() => match item {
                    Some(Ok(m)) => match disposition(&m, wants_logs) {
                        Disposition::Answer => {
                            held.answered = true;
                            let out = mcpgate_bridge::to_modern_answer(&m, &held.method, held.server_info());
                            yield Ok(Frame::data(mcpgate_jsonrpc::sse::message_event(None, &out)));
                            break;
                        }
                        Disposition::Forward => {
                            yield Ok(Frame::data(mcpgate_jsonrpc::sse::message_event(None, m.raw())));
                        }
                        other => if let Some(l) = &held.lease { server_message(l, &m, other).await },
                    },
                    Some(Err(e)) => {
                        held.answered = true;
                        let body = FrontError::from(e).to_jsonrpc().to_body(held.id.as_ref());
                        yield Ok(Frame::data(mcpgate_jsonrpc::sse::message_event(None, &body)));
                        break;
                    }
                    None => break,
                },
                _ = tick.tick() => yield Ok(Frame::data(Bytes::from_static(mcpgate_jsonrpc::sse::KEEP_ALIVE))),
            }
        }
        drop(ex);
    };
    let mut r = crate::sse::response(StreamBody::new(body).boxed_unsync());
    r.headers_mut().insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    Ok(r)
}

/// What the upstream sent that is not for the client's stream: a `ping` is answered, a
/// request the bridge cannot put to the client is refused, the rest is dropped.
async fn server_message(lease: &BridgeLease, m: &Message, d: Disposition) {
    let Some(id) = m.id() else { return };
    let rid: serde_json::Value =
        serde_json::from_str(id.as_raw()).unwrap_or(serde_json::Value::Null);
    let answer = match d {
        Disposition::Ping => json!({"jsonrpc": "2.0", "id": rid, "result": {}}),
        Disposition::ForClient | Disposition::Refuse => {
            debug!(session = %lease.session().tag(), method = m.method().unwrap_or(""), "bridge: a server request the client cannot be asked; refused");
            json!({"jsonrpc": "2.0", "id": rid, "error": {"code": METHOD_NOT_FOUND, "message": "Method not found: mcpgate's era bridge cannot put this request to a 2026-07-28 client"}})
        }
        Disposition::Answer | Disposition::Forward | Disposition::Drop => return,
    };
    if let Ok(a) = Message::parse(Bytes::from(answer.to_string()))
        && let Err(e) = lease.session().notify(a).await
    {
        debug!(error = %e, "bridge: could not answer the upstream");
    }
}

/// Whether the upstream's `initialize` answer declares the logging capability.
fn has_logging(init: &Message) -> bool {
    serde_json::from_slice::<serde_json::Value>(init.raw())
        .ok()
        .and_then(|v| v.pointer("/result/capabilities/logging").map(|_| ()))
        .is_some()
}

fn bridge_error(
    e: &mcpgate_bridge::BridgeError,
    id: Option<&Id>,
    server: &ServerSpec,
    method: &str,
) -> Response<Body> {
    info!(server = %server.name, era = "2026", method, error = %e, "bridge: cannot translate");
    json(
        StatusCode::OK,
        JsonRpcError::new(mcpgate_jsonrpc::error::INTERNAL_ERROR, e.to_string()).to_body(id),
    )
}

/// The lease of a streaming answer: given back when the stream ends; when the client
/// went away before the answer, the request is cancelled upstream first.
struct Held {
    lease: Option<BridgeLease>,
    id: Option<Id>,
    answered: bool,
    method: String,
}

impl Held {
    fn server_info(&self) -> Option<&serde_json::Value> {
        self.lease.as_ref().and_then(BridgeLease::server_info)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        let (false, Some(id)) = (self.answered, self.id.take()) else {
            return;
        };
        let rid: serde_json::Value =
            serde_json::from_str(id.as_raw()).unwrap_or(serde_json::Value::Null);
        let cancel = json!({"jsonrpc": "2.0", "method": mcp::CANCELLED, "params": {"requestId": rid, "reason": "the client closed its stream"}});
        let Ok(msg) = Message::parse(Bytes::from(cancel.to_string())) else {
            return;
        };
        let session = lease.session().clone();
        session.spawn(async move {
            if let Err(e) = lease.session().notify(msg).await {
                debug!(error = %e, "bridge: could not cancel upstream");
            }
            drop(lease);
        });
    }
}
