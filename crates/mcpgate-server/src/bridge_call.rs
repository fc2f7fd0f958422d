//! One bridged call on its pooled session: its answer as one JSON body or an SSE stream
//! (progress and the logs asked for on the way), a server `ping` answered here, a server
//! request for the client turned into an `input_required` result (the call held until the
//! client's retry), and a client that closes its stream before the answer cancelling the
//! call upstream (`notifications/cancelled`) before the session goes back to the pool.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use mcpgate_bridge::{ClientMeta, Disposition, disposition};
use mcpgate_jsonrpc::{Id, JsonRpcError, Message, sse};
use mcpgate_session::{BridgeLease, Exchange, HeldCall, ServerSpec, SessionError};
use serde_json::Value;
use tracing::{debug, info};

use crate::answers::{OnDrop, request_error, status_of};
use crate::body::{Body, json};
use crate::error::FrontError;
use crate::front::Front;
use crate::inflight::Slot;
use crate::request::Who;

/// A bridged call in flight.
pub(crate) struct Call {
    pub(crate) lease: BridgeLease,
    pub(crate) ex: Exchange,
    pub(crate) method: String,
    /// The id of the client request being answered (a retry's own, when resumed).
    pub(crate) id: Option<Id>,
    /// Whether the request asked for log messages.
    pub(crate) wants_logs: bool,
    pub(crate) started: std::time::Instant,
    pub(crate) principal: Who,
    /// What identifies the call beyond its method (see `mcpgate_bridge::Request::fingerprint`): a
    /// retry must be the same call.
    pub(crate) fingerprint: String,
}

impl Call {
    /// The upstream's answer in the client's revision, with the id of the request being
    /// answered.
    fn final_answer(&self, m: &Message) -> Bytes {
        let out = mcpgate_bridge::to_modern_answer(m, &self.method, self.lease.server_info());
        match (&self.id, Message::parse(out.clone())) {
            (Some(id), Ok(a)) if a.id() != Some(id) => a.with_id(id).map_or(out, Message::into_raw),
            _ => out,
        }
    }
}

/// What woke the stream.
enum Act {
    Stop,
    Item(Option<Result<Message, SessionError>>),
    Tick,
}

/// What a message from the upstream made of the call.
enum Step {
    /// Keep reading.
    Next,
    /// For the client's stream.
    Stream(Message),
    /// The last thing the client gets (the answer, or `input_required`); the call is
    /// over (its session back in the pool) or held.
    Done(Bytes),
}

async fn step(front: &Front, server: &ServerSpec, held: &mut Held, m: Message) -> Step {
    let Some(call) = held.0.as_ref() else {
        return Step::Next;
    };
    match disposition(&m, call.wants_logs) {
        Disposition::Answer => {
            front
                .table
                .metrics()
                .observe(&call.method, "2026", call.started);
            let body = call.final_answer(&m);
            // Answered: the session goes back to the pool as it is.
            drop(held.0.take());
            Step::Done(body)
        }
        Disposition::Forward => Step::Stream(m),
        Disposition::ForClient if mcpgate_bridge::ASKS_CLIENT.contains(&call.method.as_str()) => {
            let (Some(uid), Some(call)) = (m.id().cloned(), held.0.take()) else {
                return Step::Next;
            };
            let Call {
                lease,
                ex,
                method,
                id,
                wants_logs,
                started,
                principal,
                fingerprint,
            } = call;
            let hc = HeldCall::new(
                lease,
                ex,
                vec![("mcpgate-1".to_owned(), uid)],
                (method.clone(), fingerprint.clone()),
                principal.clone(),
                &server.name,
            );
            match front.held.hold(hc) {
                Ok(state) => {
                    debug!(server = %server.name, method = m.method().unwrap_or(""), "bridge: asking the client with input_required");
                    Step::Done(mcpgate_bridge::input_required(
                        id.as_ref(),
                        &[("mcpgate-1".to_owned(), &m)],
                        &state,
                    ))
                }
                Err(h) => {
                    info!(server = %server.name, "bridge: too many calls waiting for their clients; the server's request is refused");
                    let h = *h;
                    held.0 = Some(Call {
                        lease: h.lease,
                        ex: h.exchange,
                        method,
                        id,
                        wants_logs,
                        started,
                        principal,
                        fingerprint,
                    });
                    if let Some(c) = held.0.as_ref() {
                        server_message(&c.lease, &m, Disposition::Refuse).await;
                    }
                    Step::Next
                }
            }
        }
        Disposition::ForClient => {
            server_message(&call.lease, &m, Disposition::Refuse).await;
            Step::Next
        }
        other => {
            server_message(&call.lease, &m, other).await;
            Step::Next
        }
    }
}

/// Answers the client: one JSON body when nothing has to stream before the answer, an
/// SSE stream otherwise. From here on the call is guarded: however this ends before the
/// answer (the client gone, an error), the call is cancelled upstream and its session
/// ended, never handed to the next request.
pub(crate) async fn respond(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    call: Call,
    slot: Slot,
) -> Response<Body> {
    let (id, method) = (call.id.clone(), call.method.clone());
    let mut held = Held(Some(call));
    let first = loop {
        let item = match held.0.as_mut() {
            Some(c) => c.ex.next().await,
            None => None,
        };
        let m = match item {
            Some(Ok(m)) => m,
            Some(Err(e)) => return request_error(e, id.as_ref(), server, &method),
            None => return request_error(SessionError::Closed, id.as_ref(), server, &method),
        };
        match step(front, server, &mut held, m).await {
            Step::Next => {}
            Step::Stream(m) => break m,
            Step::Done(body) => {
                let status = Message::parse(body.clone()).map_or(StatusCode::OK, |a| status_of(&a));
                return json(status, body);
            }
        }
    };
    let every = front.cfg.keep_alive;
    let closing = front.closing.clone();
    let front = front.clone();
    let server = server.clone();
    let started = held
        .0
        .as_ref()
        .map_or_else(std::time::Instant::now, |c| c.started);
    let body = async_stream::stream! {
        let _slot = slot;
        let mut held = held;
        let table = front.table.clone();
        let m2 = method.clone();
        let _done = OnDrop::new(move || table.metrics().observe(&m2, "2026", started));
        yield Ok::<_, std::convert::Infallible>(Frame::data(sse::message_event(None, first.raw())));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let act = {
                let Some(c) = held.0.as_mut() else { break };
                tokio::select! {
                    () = closing.cancelled() => Act::Stop,
                    item = c.ex.next() => Act::Item(item),
                    _ = tick.tick() => Act::Tick,
                }
            };
            let item = match act {
                Act::Stop => break,
                Act::Tick => {
                    yield Ok(Frame::data(Bytes::from_static(sse::KEEP_ALIVE)));
                    continue;
                }
                Act::Item(item) => item,
            };
            match item {
                Some(Ok(m)) => match step(&front, &server, &mut held, m).await {
                    Step::Next => {}
                    Step::Stream(m) => yield Ok(Frame::data(sse::message_event(None, m.raw()))),
                    Step::Done(body) => {
                        yield Ok(Frame::data(sse::message_event(None, &body)));
                        break;
                    }
                },
                Some(Err(e)) => {
                    let body = FrontError::from(e).to_jsonrpc().to_body(id.as_ref());
                    yield Ok(Frame::data(sse::message_event(None, &body)));
                    break;
                }
                None => break,
            }
        }
    };
    let mut r = crate::sse::response(StreamBody::new(body).boxed_unsync());
    r.headers_mut().insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    r
}

/// Sets the pooled session's log level when the request asks for logs and the server
/// has logging; whether log messages go to the client.
pub(crate) async fn log_level(
    lease: &BridgeLease,
    meta: &ClientMeta,
) -> Result<bool, SessionError> {
    match meta.log_level.as_deref() {
        Some(level) if has_logging(lease.init()) => {
            lease.set_level(level).await?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// The client's answers (`inputResponses`) to the upstream's held questions.
pub(crate) async fn answer_questions(
    lease: &BridgeLease,
    pending: &[(String, Id)],
    responses: &serde_json::Map<String, Value>,
) {
    for (key, uid) in pending {
        let answer = mcpgate_bridge::input_answer(uid, responses.get(key));
        if let Ok(a) = Message::parse(answer)
            && let Err(e) = lease.session().notify(a).await
        {
            debug!(error = %e, "bridge: could not hand the client's answer upstream");
        }
    }
}

/// What the upstream sent that is not for the client's stream: a `ping` is answered, a
/// request the bridge cannot put to the client is refused, the rest is dropped.
async fn server_message(lease: &BridgeLease, m: &Message, d: Disposition) {
    match d {
        Disposition::Ping => {}
        Disposition::ForClient | Disposition::Refuse => {
            debug!(session = %lease.session().tag(), method = m.method().unwrap_or(""), "bridge: a server request the client cannot be asked; refused");
        }
        Disposition::Answer | Disposition::Forward | Disposition::Drop => return,
    }
    lease.session().answer_unasked(m).await;
}

/// Whether the upstream's `initialize` answer declares the logging capability.
fn has_logging(init: &Message) -> bool {
    serde_json::from_slice::<Value>(init.raw())
        .ok()
        .is_some_and(|v| v.pointer("/result/capabilities/logging").is_some())
}

pub(crate) fn bridge_error(
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

/// A call not yet answered. Dropped with the call in it (the client went away, an
/// error, the gateway draining), it cancels the call upstream and ends its session — a
/// session-era server may still send that call's messages, which must never reach the
/// pool's next request.
pub(crate) struct Held(pub(crate) Option<Call>);

impl Drop for Held {
    fn drop(&mut self) {
        let Some(call) = self.0.take() else { return };
        let Call { lease, ex, .. } = call;
        let session = lease.session().clone();
        let cancel = ex.request_id().and_then(|id| {
            Message::parse(mcpgate_jsonrpc::cancelled(id, "the client went away")).ok()
        });
        info!(session = %session.tag(), "bridge: a call ended before its answer; cancelled, its session ended");
        session.clone().spawn(async move {
            if let Some(msg) = cancel
                && let Err(e) = session.notify(msg).await
            {
                debug!(error = %e, "bridge: could not cancel upstream");
            }
            drop(ex);
            drop(session.close(mcpgate_session::CloseReason::ClientGone));
            drop(lease);
        });
    }
}
