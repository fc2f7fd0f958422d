//! The era bridge at the front: a 2026-07-28 request for a server that speaks only the
//! session era runs on an upstream session the gateway holds for the client (the session
//! crate's `BridgePool`, leased to this one request), translated both ways by the
//! `mcpgate-bridge` crate. `server/discover` is answered from the pooled session's
//! `InitializeResult`; `_meta.logLevel` becomes `logging/setLevel` on the session. A
//! retry carrying `requestState` resumes the call held for it (`bridge_call.rs` answers
//! and streams); `subscriptions/listen` gets a session of its own (`bridge_listen.rs`).

use std::sync::Arc;

use http::{Response, StatusCode};
use mcpgate_jsonrpc::error::{INVALID_PARAMS, METHOD_NOT_FOUND};
use mcpgate_jsonrpc::{Id, JsonRpcError, Message, mcp};
use mcpgate_session::{Refusal, ServerSpec, SessionError};
use serde_json::Value;
use tracing::{debug, info};

use crate::answers::request_error;
use crate::body::{Body, json};
use crate::bridge_call::{Call, Held, answer_questions, respond};
use crate::error::FrontError;
use crate::front::Front;
use crate::inflight::Slot;
use crate::request::Who;

/// Methods a 2026-07-28 server does not have (session state there).
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
    if NOT_MODERN.contains(&method.as_str()) {
        info!(server = %server.name, era = "2026", method, "bridge: method not in 2026-07-28");
        return Ok(json(
            StatusCode::NOT_FOUND,
            JsonRpcError::new(
                METHOD_NOT_FOUND,
                "Method not found in protocol revision 2026-07-28",
            )
            .to_body(id.as_ref()),
        ));
    }
    if method == mcp::LISTEN {
        return Ok(crate::bridge_listen::listen(front, server, &msg, who, slot).await);
    }
    // The body is parsed once, here; everything the bridge needs of it comes from this.
    let req = mcpgate_bridge::Request::of(&msg);
    if let Some(retry) = req.retry() {
        return resume(front, server, (&msg, &req), who, slot, retry).await;
    }
    let meta = req.meta();
    let lease = match front.bridges.lease(server, who.clone(), &meta).await {
        Ok(l) => l,
        Err(e) => return Ok(request_error(e, id.as_ref(), server, &method)),
    };
    debug!(server = %server.name, era = "2026", method, session = %lease.session().tag(), "bridged");
    if method == mcp::DISCOVER {
        let rid = id.clone().unwrap_or_else(|| Id::number(0));
        return Ok(match mcpgate_bridge::discover(&rid, lease.init()) {
            Ok(b) => json(StatusCode::OK, b),
            Err(e) => crate::bridge_call::bridge_error(&e, id.as_ref(), server, &method),
        });
    }
    let wants_logs = match crate::bridge_call::log_level(&lease, &meta).await {
        Ok(w) => w,
        Err(e) => return Ok(request_error(e, id.as_ref(), server, &method)),
    };
    let up = match req.to_session() {
        Ok(m) => m,
        Err(e) => {
            return Ok(crate::bridge_call::bridge_error(
                &e,
                id.as_ref(),
                server,
                &method,
            ));
        }
    };
    let started = front.table.metrics().modern_request();
    let ex = match lease.session().request_exclusive(up).await {
        Ok(ex) => ex,
        Err(e) => return Ok(request_error(e, id.as_ref(), server, &method)),
    };
    let call = Call {
        lease,
        ex,
        method,
        id,
        wants_logs,
        started,
        principal: who.clone(),
        fingerprint: req.fingerprint(),
    };
    Ok(respond(front, server, call, slot).await)
}

/// A retry: the held call is taken (only by its own principal, for the same server and
/// method), the upstream's questions answered with the client's answers, and the call's
/// rest streamed to this request.
async fn resume(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    (msg, req): (&Message, &mcpgate_bridge::Request),
    who: &Who,
    slot: Slot,
    (state, responses): (String, serde_json::Map<String, Value>),
) -> Result<Response<Body>, FrontError> {
    let id = msg.id().cloned();
    let method = msg.method().unwrap_or("").to_owned();
    let fingerprint = req.fingerprint();
    let held = match front.held.take(
        &state,
        who.as_deref(),
        &server.name,
        (&method, &fingerprint),
    ) {
        Ok(h) => h,
        Err(r) => {
            let why = match r {
                // Also what a retry that reached another replica than the one holding
                // the call gets (held calls are per replica): it says to start again.
                Refusal::Unknown => {
                    "unknown or expired requestState (it may be held by another gateway replica); send the request again without requestState to start the call over"
                }
                Refusal::Foreign => "requestState was issued to another client or call",
            };
            info!(server = %server.name, era = "2026", method, why, "bridge: retry refused");
            return Ok(json(
                StatusCode::OK,
                JsonRpcError::new(INVALID_PARAMS, format!("Invalid params: {why}"))
                    .to_body(id.as_ref()),
            ));
        }
    };
    debug!(server = %server.name, era = "2026", method, session = %held.lease.session().tag(), "bridge: resuming a held call");
    // Guarded from here: a retry that goes away cancels the call and ends its session.
    let mut guard = Held(Some(Call {
        lease: held.lease,
        ex: held.exchange,
        method: method.clone(),
        id: id.clone(),
        wants_logs: false,
        started: front.table.metrics().modern_request(),
        principal: who.clone(),
        fingerprint,
    }));
    if let Some(c) = guard.0.as_ref() {
        answer_questions(&c.lease, &held.pending, &responses).await;
    }
    let wants_logs = match guard.0.as_ref() {
        Some(c) => match crate::bridge_call::log_level(&c.lease, &req.meta()).await {
            Ok(w) => w,
            Err(e) => return Ok(request_error(e, id.as_ref(), server, &method)),
        },
        None => false,
    };
    let Some(mut call) = guard.0.take() else {
        return Ok(request_error(
            SessionError::Closed,
            id.as_ref(),
            server,
            &method,
        ));
    };
    call.wants_logs = wants_logs;
    Ok(respond(front, server, call, slot).await)
}
