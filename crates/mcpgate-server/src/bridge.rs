//! The era bridge at the front (the plan's `Bridge`): a 2026-07-28 request for a server
//! that speaks only the session era runs on an upstream session the gateway holds for the
//! client (the session crate's `bridge_pool.rs`, leased to this one request), translated
//! both ways by the `mcpgate-bridge` crate. `server/discover` is answered from the pooled
//! session's `InitializeResult`; `_meta.logLevel` becomes `logging/setLevel` on the
//! session. A retry carrying `requestState` resumes the call held for it
//! (`bridge_call.rs` answers and streams); `subscriptions/listen` gets a session of its own
//! (`bridge_listen.rs`).

use std::sync::Arc;

use http::{Response, StatusCode};
use mcpgate_jsonrpc::error::{INVALID_PARAMS, METHOD_NOT_FOUND};
use mcpgate_jsonrpc::{Id, JsonRpcError, Message, Method};
use mcpgate_session::{CallKey, Era, SessionError, Unresumable};
use serde_json::Value;
use tracing::{debug, info};

use crate::body::{Body, json};
use crate::bridge_call::{Answering, Call, Held, answer_questions, respond};
use crate::error::{At, failed};
use crate::inflight::Permit;
use crate::plan::{Cx, Stateless};

/// Whether 2026-07-28 has `method` (the others are session state there).
fn in_2026(method: &Method) -> bool {
    !matches!(
        method,
        Method::Initialize
            | Method::Ping
            | Method::SetLevel
            | Method::ResourcesSubscribe
            | Method::ResourcesUnsubscribe
    )
}

/// A session that ended under a bridged request is, to its 2026-07-28 client, a request
/// that failed because the session closed: the client knows no session.
fn no_session(e: SessionError) -> SessionError {
    match e {
        SessionError::NotFound => SessionError::Closed,
        e => e,
    }
}

/// Answers one 2026-07-28 request on a pooled session-era upstream session.
pub(crate) async fn post(cx: Cx<'_>, req: Stateless) -> Response<Body> {
    let (Cx { front, server, who }, Stateless { msg, permit }) = (cx, req);
    let id = msg.id().cloned();
    let method = msg.method().cloned().unwrap_or(Method::Ping);
    if !in_2026(&method) {
        info!(server = %server.name, era = Era::Modern.as_str(), %method, "bridge: method not in 2026-07-28");
        let e = JsonRpcError::new(
            METHOD_NOT_FOUND,
            "Method not found in protocol revision 2026-07-28",
        );
        return json(StatusCode::NOT_FOUND, e.to_body(id.as_ref()));
    }
    if method == Method::Listen {
        return crate::bridge_listen::listen(cx, &msg, permit).await;
    }
    // The body is parsed once, here; everything the bridge needs of it comes from this.
    let req = mcpgate_bridge::Request::of(&msg);
    if let Some(retry) = req.retry()
        && !mcpgate_bridge::is_consent_state(&retry.0)
    {
        return resume(cx, (&msg, &req), permit, retry).await;
    }
    let meta = req.meta();
    let lease = match front.table.bridge_lease(server, who.clone(), &meta).await {
        Ok(l) => l,
        Err(e) => return failed(no_session(e), id.as_ref(), At::stateless(server, &method)),
    };
    debug!(server = %server.name, era = Era::Modern.as_str(), %method, session = %lease.session().tag(), "bridged");
    if method == Method::Discover {
        let rid = id.clone().unwrap_or_else(|| Id::number(0));
        return match mcpgate_bridge::discover(&rid, lease.init()) {
            Ok(b) => json(StatusCode::OK, b),
            Err(e) => {
                crate::bridge_call::bridge_error(&e, id.as_ref(), At::stateless(server, &method))
            }
        };
    }
    let wants_logs = match crate::bridge_call::log_level(&lease, &meta).await {
        Ok(w) => w,
        Err(e) => return failed(no_session(e), id.as_ref(), At::stateless(server, &method)),
    };
    let up = match req.to_session() {
        Ok(m) => m,
        Err(e) => {
            return crate::bridge_call::bridge_error(
                &e,
                id.as_ref(),
                At::stateless(server, &method),
            );
        }
    };
    let started = front.table.metrics().modern_request();
    let ex = match lease.session().request_exclusive(up).await {
        Ok(ex) => ex,
        Err(e) => return failed(no_session(e), id.as_ref(), At::stateless(server, &method)),
    };
    let key = CallKey {
        method,
        fingerprint: req.fingerprint(),
        principal: who.clone(),
        server: Arc::from(server.name.as_str()),
    };
    let answering = Answering {
        id,
        wants_logs,
        started,
    };
    respond(front, server, Call::new(lease, ex, key, answering), permit).await
}

/// A retry: the held call is taken (only by its own principal, for the same server and
/// method), the upstream's questions answered with the client's answers, and the call's
/// rest streamed to this request.
async fn resume(
    cx: Cx<'_>,
    (msg, req): (&Message, &mcpgate_bridge::Request),
    permit: Permit,
    (state, responses): (String, serde_json::Map<String, Value>),
) -> Response<Body> {
    let Cx { front, server, who } = cx;
    let id = msg.id().cloned();
    let method = msg.method().cloned().unwrap_or(Method::Ping);
    let key = CallKey {
        method: method.clone(),
        fingerprint: req.fingerprint(),
        principal: who.clone(),
        server: Arc::from(server.name.as_str()),
    };
    let held = match front.held.take(&state, &key) {
        Ok(h) => h,
        Err(r) => {
            let why = match r {
                // Also what a retry that reached another replica than the one holding
                // the call gets (held calls are per replica): it says to start again.
                Unresumable::Unknown => {
                    "unknown or expired requestState (it may be held by another gateway replica); send the request again without requestState to start the call over"
                }
                Unresumable::Foreign => "requestState was issued to another client or call",
            };
            info!(server = %server.name, era = Era::Modern.as_str(), %method, why, "bridge: retry refused");
            let e = JsonRpcError::new(INVALID_PARAMS, format!("Invalid params: {why}"));
            return json(StatusCode::OK, e.to_body(id.as_ref()));
        }
    };
    debug!(server = %server.name, era = Era::Modern.as_str(), %method, session = %held.lease.session().tag(), "bridge: resuming a held call");
    let pending = held.pending.clone();
    let answering = Answering {
        id: id.clone(),
        wants_logs: false,
        started: front.table.metrics().modern_request(),
    };
    // Guarded from here: a retry that goes away cancels the call and ends its session.
    let mut guard = Held(Some(Call::from_held(held, answering)));
    let Some(call) = guard.0.as_mut() else {
        return failed(
            SessionError::Closed,
            id.as_ref(),
            At::stateless(server, &method),
        );
    };
    answer_questions(&call.lease, &pending, &responses).await;
    match crate::bridge_call::log_level(&call.lease, &req.meta()).await {
        Ok(w) => call.answering.wants_logs = w,
        Err(e) => return failed(no_session(e), id.as_ref(), At::stateless(server, &method)),
    }
    let Some(call) = guard.0.take() else {
        return failed(
            SessionError::Closed,
            id.as_ref(),
            At::stateless(server, &method),
        );
    };
    respond(front, server, call, permit).await
}
