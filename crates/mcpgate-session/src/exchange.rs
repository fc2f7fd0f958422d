//! One client request in flight.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use mcpgate_jsonrpc::{Id, Message, Method};
use mcpgate_upstream::{Replies, UpstreamError};
use tokio::sync::mpsc;
use tokio::time::Sleep;

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::error::SessionError;
use crate::session::{InflightSlot, Session};

impl Session {
    /// Answers a server request no client will be asked (the era bridge's sessions):
    /// `ping` with `{}`, anything else with `-32601`.
    pub async fn answer_unasked(self: &Arc<Self>, q: &Message) {
        let Some(id) = q.id() else { return };
        let body = if q.is(&Method::Ping) {
            mcpgate_jsonrpc::result_body(Some(id), "{}")
        } else {
            mcpgate_jsonrpc::JsonRpcError::new(
                mcpgate_jsonrpc::error::METHOD_NOT_FOUND,
                "Method not found: there is no client to ask",
            )
            .to_body(Some(id))
        };
        if let Ok(a) = Message::parse(body) {
            let _ = self.upstream.send(a).await;
        }
    }

    /// Sends a client request upstream. The returned [`Exchange`] yields what the upstream
    /// relates to it and ends with the response.
    pub async fn request(self: &Arc<Self>, msg: Message) -> Result<Exchange, SessionError> {
        self.request_with(msg, false).await
    }

    /// Sends a request on a session leased to it alone (the era bridge): every message
    /// the upstream sends while it is in flight belongs to it, in the order sent — its
    /// channel is registered before the request goes out, whatever was left over from an
    /// earlier request is dropped first, and what is left when it ends goes nowhere else.
    pub async fn request_exclusive(
        self: &Arc<Self>,
        msg: Message,
    ) -> Result<Exchange, SessionError> {
        self.request_with(msg, true).await
    }

    async fn request_with(
        self: &Arc<Self>,
        msg: Message,
        exclusive: bool,
    ) -> Result<Exchange, SessionError> {
        // The request's clock starts here: its latency and its deadline cover the wait for
        // the upstream's answer too.
        let started = Instant::now();
        let table = &self.home.rt;
        if self.is_closing() {
            return Err(SessionError::NotFound);
        }
        let n = self.inflight.fetch_add(1, Ordering::AcqRel);
        // The exchange (or this guard on early return) gives the slot back.
        let slot = InflightSlot(self.clone());
        if n >= table.cfg.max_inflight {
            return Err(SessionError::TooManyInflight);
        }
        self.touch();
        self.messages_in.fetch_add(1, Ordering::Relaxed);
        table.metrics.session_request();
        table.metrics.bytes("in", msg.raw().len());
        let method = crate::metrics::Metrics::series(msg.method_name(), crate::eras::Era::Session);
        let id = msg.id().cloned();
        // The upstream's standalone stream is opened by the session's first request after
        // initialize (or
        // the client's GET, whichever comes first), not only when the client opens its own
        // GET: whatever the server sends there in answer to a request is then received
        // and routed to the client's GET stream, an in-flight POST stream or the backlog —
        // never lost because the client's GET reached the upstream after the request (or
        // never). The request waits until that stream is open. An idle session holds no
        // upstream stream.
        // A sealed session's upstream stream opens with its client's GET instead (the
        // client may hold it on another replica); a request still waits while this
        // replica is opening it for a GET here.
        if !msg.is(&Method::Initialize) {
            if !self.is_sealed() {
                self.upstream.listen();
            }
            self.upstream.settled().await;
        }
        let timeout = table.cfg.request_timeout;
        let deadline = tokio::time::Instant::from_std(started) + timeout;
        let mut unanswered = Vec::new();
        let side = exclusive.then(|| {
            let key = self.next_key.fetch_add(1, Ordering::Relaxed);
            let rx = match self.router.lock() {
                Ok(mut r) => {
                    unanswered = r.drop_backlog();
                    r.add_post(key)
                }
                Err(_) => mpsc::channel(1).1,
            };
            (key, rx)
        });
        // What the server asked while no request held the session (a ping, roots/list
        // after initialize) gets an answer rather than silence.
        for q in unanswered {
            self.answer_unasked(&q).await;
        }
        let replies = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(SessionError::Closed),
            r = tokio::time::timeout_at(
                deadline,
                tracing::Instrument::instrument(self.upstream.request(msg), upstream_span(self)),
            ) => match r {
                Ok(r) => r.map_err(|e| self.upstream_failed(e))?,
                Err(_) => return Err(SessionError::Timeout(timeout)),
            },
        };
        let mut ex = Exchange::new(slot, replies, id, timeout, method, started);
        if let Some((key, rx)) = side {
            ex.exclusive = true;
            ex.key = key;
            ex.side = Some(rx);
            ex.deadline = Some(Box::pin(tokio::time::sleep_until(deadline)));
        }
        Ok(ex)
    }
}

/// A request on its way: yields the messages the upstream relates to it (and, while it
/// is in flight, server messages of the same session that have no other stream), then
/// the response. Dropping it hands unsent messages back to the session.
pub struct Exchange {
    slot: InflightSlot,
    replies: Replies,
    /// Registered with the router only once the exchange has to wait for its answer: an
    /// answer that is already there (a JSON response) costs no channel and no timer.
    side: Option<mpsc::Receiver<Message>>,
    key: u64,
    id: Option<Id>,
    deadline: Option<Pin<Box<Sleep>>>,
    timeout: Duration,
    done: bool,
    /// When the request was sent and its method label, for the latency histogram.
    started: std::time::Instant,
    /// Its latency series (see [`crate::metrics::Metrics::series`]).
    method: usize,
    /// Whether its session serves it alone (see [`Session::request_exclusive`]).
    exclusive: bool,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("id", &self.id)
            .field("done", &self.done)
            .finish()
    }
}

impl Exchange {
    pub(crate) fn new(
        slot: InflightSlot,
        replies: Replies,
        id: Option<Id>,
        timeout: Duration,
        method: usize,
        started: Instant,
    ) -> Self {
        let key = slot
            .0
            .next_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Exchange {
            slot,
            replies,
            side: None,
            key,
            id,
            deadline: None,
            timeout,
            done: false,
            started,
            method,
            exclusive: false,
        }
    }

    fn session(&self) -> &Arc<Session> {
        &self.slot.0
    }

    /// The client's id of the request.
    pub fn request_id(&self) -> Option<&Id> {
        self.id.as_ref()
    }

    /// The next message for the client, or an error that ends the exchange. `None` once
    /// the response (or an error) has been returned.
    pub async fn next(&mut self) -> Option<Result<Message, SessionError>> {
        if self.done {
            return None;
        }
        let reply = match self.side {
            // Fast path: the answer is already here.
            None => match self.replies.next().now_or_never() {
                Some(r) => Some(r),
                None => {
                    self.wait_setup();
                    None
                }
            },
            Some(_) => None,
        };
        let item = match reply {
            Some(r) => self.reply(r),
            None => {
                let cancel = self.session().cancel.clone();
                let (Some(side), Some(deadline)) = (self.side.as_mut(), self.deadline.as_mut())
                else {
                    return Some(Err(SessionError::Closed));
                };
                tokio::select! {
                    biased;
                    // Before the replies: a server message routed here was sent by the
                    // upstream before the response, and must reach the client before it.
                    Some(m) = side.recv() => {
                        self.session().messages_out.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return Some(Ok(m));
                    }
                    r = self.replies.next() => self.reply(r),
                    // After the replies: when the upstream died, its own error (already
                    // queued) says more than "session closed".
                    () = cancel.cancelled() => Err(SessionError::Closed),
                    () = deadline => Err(SessionError::Timeout(self.timeout)),
                }
            }
        };
        match item {
            Ok(m) => {
                if m.is_response() {
                    self.done = true;
                    self.observe();
                }
                self.session().home.rt.metrics.bytes("out", m.raw().len());
                self.session()
                    .messages_out
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.session().touch();
                Some(Ok(m))
            }
            Err(e) => {
                self.done = true;
                self.observe();
                if let SessionError::Timeout(_) = e {
                    self.cancel_upstream("timeout");
                }
                Some(Err(e))
            }
        }
    }

    /// Registers the side channel and the deadline: the exchange is about to wait.
    fn wait_setup(&mut self) {
        let session = self.slot.0.clone();
        self.side = Some(match session.router.lock() {
            Ok(mut r) => r.add_post(self.key),
            Err(_) => mpsc::channel(1).1,
        });
        let at = tokio::time::Instant::from_std(self.started) + self.timeout;
        self.deadline = Some(Box::pin(tokio::time::sleep_until(at)));
    }

    fn reply(&self, r: Option<Result<Message, UpstreamError>>) -> Result<Message, SessionError> {
        match r {
            Some(Ok(m)) => Ok(m),
            Some(Err(e)) => Err(self.failed(e)),
            None => Err(self.failed(UpstreamError::Protocol(
                mcpgate_upstream::ProtocolError::NoResponse,
            ))),
        }
    }

    /// An upstream failure of this request: a consequence of the session closing for
    /// another reason (client DELETE, idle, shutdown) is reported as such; otherwise it is
    /// the upstream's failure.
    fn failed(&self, e: UpstreamError) -> SessionError {
        match self.session().close_reason() {
            Some(r) if !r.is_upstream() => SessionError::Closed,
            _ => self.session().upstream_failed(e),
        }
    }

    /// Records the request's latency.
    fn observe(&self) {
        self.session()
            .home
            .rt
            .metrics
            .observe_series(self.method, self.started);
    }

    /// Whether the response has been returned.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Tells the upstream to stop working on this request (best effort, in the
    /// background). Used on timeout and when the client abandons the request.
    fn cancel_upstream(&mut self, reason: &str) {
        let Some(id) = &self.id else { return };
        let Ok(msg) = Message::parse(mcpgate_jsonrpc::cancelled(id, reason)) else {
            return;
        };
        let session = self.session().clone();
        if session.is_closing() {
            return;
        }
        // The request stays registered upstream until the cancellation is out: a pipe
        // upstream maps the client's id to its own only while the request is known.
        let held = self.replies.detach();
        let tracker = session.home.rt.tracker.clone();
        tracker.spawn(async move {
            let _ = session.notify(msg).await;
            drop(held);
        });
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let Some(side) = self.side.as_mut() else {
            return;
        };
        let session = self.slot.0.clone();
        if let Ok(mut r) = session.router.lock() {
            r.remove_post(self.key);
        }
        side.close();
        if self.exclusive {
            return;
        }
        let mut left = Vec::new();
        while let Ok(m) = side.try_recv() {
            left.push(m);
        }
        for m in left {
            session.route_unrelated(m);
        }
    }
}

/// The span of one upstream request: a child of the request's span, and none when the
/// request has none (not traced, and no debug logging): a span without a parent would
/// start a trace of its own.
fn upstream_span(s: &Session) -> tracing::Span {
    if tracing::Span::current().is_disabled() {
        return tracing::Span::none();
    }
    tracing::debug_span!("upstream", "otel.kind" = "client", server = %s.server, session = %s.tag, transport = s.upstream.kind())
}
