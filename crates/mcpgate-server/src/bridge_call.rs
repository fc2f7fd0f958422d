//! One bridged call on its pooled session: its answer as one JSON body or an SSE stream
//! (progress and the logs asked for on the way), a server `ping` answered here, a server
//! request for the client turned into an `input_required` result (the call held until the
//! client's retry), and a client that closes its stream before the answer cancelling the
//! call upstream (`notifications/cancelled`) before the session goes back to the pool.

use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use mcpgate_bridge::{ClientMeta, Disposition, disposition};
use mcpgate_jsonrpc::{Id, JsonRpcError, Message, sse};
use mcpgate_session::{BridgeLease, CallKey, Era, Exchange, HeldCall, ServerSpec, SessionError};
use serde_json::Value;
use tracing::{debug, info};

use crate::body::{Body, json};
use crate::error::{At, FrontError, failed, status_of};
use crate::front::Front;
use crate::inflight::Permit;
use crate::pump::{OnDrop, Pump};

/// What the client's request being answered is: its id (a retry's own, when resumed),
/// whether it asked for log messages, when it started.
#[derive(Debug)]
pub(crate) struct Answering {
    pub(crate) id: Option<Id>,
    pub(crate) wants_logs: bool,
    pub(crate) started: std::time::Instant,
}

/// A bridged call in flight.
pub(crate) struct Call {
    pub(crate) lease: BridgeLease,
    ex: Exchange,
    /// What identifies it (a retry must be the same call).
    key: CallKey,
    pub(crate) answering: Answering,
}

/// The one question of a held call, as `inputRequests` names it.
const QUESTION: &str = "mcpgate-1";

impl Call {
    pub(crate) fn new(
        lease: BridgeLease,
        ex: Exchange,
        key: CallKey,
        answering: Answering,
    ) -> Self {
        Call {
            lease,
            ex,
            key,
            answering,
        }
    }

    /// A held call taken back by the retry answered as `answering`.
    pub(crate) fn from_held(h: HeldCall, answering: Answering) -> Self {
        Call::new(h.lease, h.exchange, h.key, answering)
    }

    /// The call held while the client answers the upstream's request `uid`; what answers
    /// it is kept aside.
    fn hold(self, uid: Id) -> (HeldCall, Answering) {
        let held = HeldCall {
            lease: self.lease,
            exchange: self.ex,
            pending: vec![(QUESTION.to_owned(), uid)],
            key: self.key,
        };
        (held, self.answering)
    }

    /// The upstream's answer in the client's revision, with the id of the request being
    /// answered.
    fn final_answer(&self, m: &Message) -> Bytes {
        let out = mcpgate_bridge::to_modern_answer(m, &self.key.method, self.lease.server_info());
        match (&self.answering.id, Message::parse(out.clone())) {
            (Some(id), Ok(a)) if a.id() != Some(id) => a.with_id(id).map_or(out, Message::into_raw),
            _ => out,
        }
    }
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
    match disposition(&m, call.answering.wants_logs) {
        Disposition::Answer => {
            let method = call.key.method.as_str();
            front
                .table
                .metrics()
                .observe(method, Era::Modern, call.answering.started);
            let body = call.final_answer(&m);
            // Answered: the session goes back to the pool as it is.
            drop(held.0.take());
            Step::Done(body)
        }
        Disposition::Forward => Step::Stream(m),
        Disposition::ForClient if mcpgate_bridge::may_ask_client(&call.key.method) => {
            ask_client(front, server, held, m).await
        }
        d @ (Disposition::ForClient | Disposition::Refuse) => {
            server_message(&call.lease, &m, d).await;
            Step::Next
        }
        other => {
            server_message(&call.lease, &m, other).await;
            Step::Next
        }
    }
}

/// The upstream asks the client: the call is held and the client gets `input_required`
/// (or, when too many calls are held, the upstream's request is refused).
async fn ask_client(front: &Front, server: &ServerSpec, held: &mut Held, m: Message) -> Step {
    let (Some(uid), Some(call)) = (m.id().cloned(), held.0.take()) else {
        return Step::Next;
    };
    let (hc, answering) = call.hold(uid);
    match front.held.hold(hc) {
        Ok(state) => {
            debug!(server = %server.name, method = m.method_name(), "bridge: asking the client with input_required");
            Step::Done(mcpgate_bridge::input_required(
                answering.id.as_ref(),
                &[(QUESTION.to_owned(), &m)],
                &state,
            ))
        }
        Err(h) => {
            info!(server = %server.name, "bridge: too many calls waiting for their clients; the server's request is refused");
            let call = Call::from_held(*h, answering);
            server_message(&call.lease, &m, Disposition::Refuse).await;
            held.0 = Some(call);
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
    permit: Permit,
) -> Response<Body> {
    let (id, method) = (call.answering.id.clone(), call.key.method.clone());
    let started = call.answering.started;
    let at = At::stateless(server, &method);
    let mut held = Held(Some(call));
    let first = loop {
        let item = match held.0.as_mut() {
            Some(c) => c.ex.next().await,
            None => None,
        };
        let m = match item {
            Some(Ok(m)) => m,
            Some(Err(e)) => return failed(e, id.as_ref(), at),
            None => return failed(SessionError::Closed, id.as_ref(), at),
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
    let (front2, server) = (front.clone(), server.clone());
    let events = async_stream::stream! {
        let _permit = permit;
        let mut held = held;
        let table = front2.table.clone();
        let m2 = method.clone();
        let _done = OnDrop::new(move || table.metrics().observe(m2.as_str(), Era::Modern, started));
        yield sse::message_event(None, first.raw());
        while let Some(c) = held.0.as_mut() {
            match c.ex.next().await {
                Some(Ok(m)) => match step(&front2, &server, &mut held, m).await {
                    Step::Next => {}
                    Step::Stream(m) => yield sse::message_event(None, m.raw()),
                    Step::Done(body) => {
                        yield sse::message_event(None, &body);
                        break;
                    }
                },
                Some(Err(e)) => {
                    let body = FrontError::from(e).to_jsonrpc().to_body(id.as_ref());
                    yield sse::message_event(None, &body);
                    break;
                }
                None => break,
            }
        }
    };
    let pump = Pump::every(front.cfg.keep_alive).until(front.closing.clone());
    crate::sse::response(pump.body(events))
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
            debug!(session = %lease.session().tag(), method = m.method_name(), "bridge: a server request the client cannot be asked; refused");
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

/// A message the bridge cannot translate: the request's JSON-RPC internal error.
pub(crate) fn bridge_error(
    e: &mcpgate_bridge::BridgeError,
    id: Option<&Id>,
    at: At<'_>,
) -> Response<Body> {
    info!(server = at.server, era = at.era.as_str(), method = at.method, error = %e, "bridge: cannot translate");
    let body = JsonRpcError::new(mcpgate_jsonrpc::error::INTERNAL_ERROR, e.to_string());
    json(StatusCode::OK, body.to_body(id))
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
