//! Streamable HTTP upstream: one upstream MCP session per client session, on the
//! server's shared [`Endpoint`] (its pooled connections).
//!
//! The request path builds nothing it could have built before: the endpoint holds the
//! parsed URL and the prebuilt headers, the session id and negotiated version are set once
//! (`OnceLock`) and read without a lock. A JSON answer is collected (usually one frame, no
//! copy) and only its envelope parsed; an SSE answer is read event by event
//! (`http_stream.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use http::header::AUTHORIZATION;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use mcpgate_jsonrpc::{Message, Method, mcp};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::credential::{self, Credential};
use crate::endpoint::{Endpoint, is_event_stream};
use crate::error::{Teardown, UpstreamError};
use crate::http_state::{PROTOCOL_VERSION, SESSION_ID, State};
use crate::http_state::{Resume, Resumed};
use crate::http_stream::{Getter, request_stream, standalone_stream};
use crate::replies::Replies;
use crate::sink::{EventSink, Opening};
use crate::timeouts::Timeouts;
use crate::transport::UpBody;

/// Largest error body read from an upstream that answered with a failure status.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Whether a standalone GET runs, and how to stop it: `on` for the request path's lock-free
/// check, the generation and stop token of the running one under a lock (per session,
/// never held across an `.await`); both change together, under the lock.
#[derive(Debug, Default)]
struct Listening {
    on: AtomicBool,
    running: std::sync::Mutex<Option<(u64, CancellationToken)>>,
    generation: std::sync::atomic::AtomicU64,
}

impl Listening {
    /// Registers a new GET stopped by `token`; with `replace`, one that runs is stopped
    /// first, else nothing is started when one runs. Returns the new GET's generation.
    fn start(&self, token: &CancellationToken, replace: bool) -> Option<u64> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let mut running = self.running.lock().ok()?;
        match running.as_ref() {
            Some(_) if !replace => return None,
            Some((_, old)) => old.cancel(),
            None => {}
        }
        *running = Some((generation, token.clone()));
        self.on.store(true, Ordering::Release);
        Some(generation)
    }

    /// Stops the GET that runs, if any.
    fn stop(&self) {
        if let Ok(mut running) = self.running.lock()
            && let Some((_, token)) = running.take()
        {
            token.cancel();
            self.on.store(false, Ordering::Release);
        }
    }

    /// Forgets GET `generation`, which ended on its own (not one that replaced it).
    fn clear(&self, generation: u64) {
        if let Ok(mut running) = self.running.lock()
            && running.as_ref().is_some_and(|(g, _)| *g == generation)
        {
            *running = None;
            self.on.store(false, Ordering::Release);
        }
    }
}

/// A dedicated Streamable HTTP upstream session.
#[derive(Debug)]
pub struct HttpUpstream {
    timeouts: Timeouts,
    endpoint: Arc<Endpoint>,
    label: Arc<str>,
    state: Arc<State>,
    cancel: CancellationToken,
    sink: Arc<dyn EventSink>,
    /// The standalone GET, if one runs.
    listen: Arc<Listening>,
    /// A sealed session (one any replica may serve): its standalone GET is open only while
    /// the client's GET stream is attached here (two replicas' GETs would take the one
    /// upstream stream from each other), and keeps the upstream's event ids on what it
    /// carries, so another replica can resume it.
    sealed: bool,
    /// Whether the standalone GET is being opened (`true`) — requests wait for it, so a
    /// server message sent in answer to them cannot reach the upstream's GET stream
    /// before that stream exists.
    opening: watch::Sender<bool>,
    /// The connector's tasks: the standalone stream's reader and the reads of answers'
    /// ends are among them.
    tasks: TaskTracker,
}

impl HttpUpstream {
    pub(crate) fn new(
        timeouts: Timeouts,
        endpoint: Arc<Endpoint>,
        o: Opening,
        sealed: Option<Resume>,
        credential: Option<Arc<dyn Credential>>,
    ) -> Self {
        let state = State {
            credential,
            ..State::default()
        };
        if let Some(Some(r)) = sealed.as_ref().map(|s| s.session.as_ref()) {
            if let Some(sid) = r
                .session_id
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                let _ = state.session_id.set(sid);
            }
            if let Ok(v) = HeaderValue::from_str(&r.version) {
                let _ = state.version.set(v);
            }
            state.initialized.store(true, Ordering::Release);
        }
        HttpUpstream {
            timeouts,
            endpoint,
            label: o.label,
            state: Arc::new(state),
            cancel: o.cancel,
            sink: o.sink,
            listen: Arc::default(),
            sealed: sealed.is_some(),
            opening: watch::channel(false).0,
            tasks: o.tasks,
        }
    }

    /// POSTs `body`; a `401` with a credential gets one renewed credential and one more
    /// try (only then is the body kept for it). Returns the answer and whether it was
    /// sent with a session id.
    async fn post(&self, body: Bytes) -> Result<(Response<UpBody>, bool), UpstreamError> {
        let mut body = body;
        let send = |auth, last| {
            let b = if last {
                std::mem::take(&mut body)
            } else {
                body.clone()
            };
            self.post_with(b, auth)
        };
        let refused = |(r, _): &(Response<UpBody>, bool)| r.status() == StatusCode::UNAUTHORIZED;
        credential::authorized(self.state.credential.as_ref(), send, refused).await
    }

    async fn post_with(
        &self,
        body: Bytes,
        auth: Option<HeaderValue>,
    ) -> Result<(Response<UpBody>, bool), UpstreamError> {
        let (version, sid, authorization) = (PROTOCOL_VERSION, SESSION_ID, AUTHORIZATION);
        let more = [
            self.state.version.get().map(|v| (&version, v)),
            self.state.session_id.get().map(|s| (&sid, s)),
            auth.as_ref().map(|a| (&authorization, a)),
        ];
        let has_sid = more[1].is_some();
        Ok((self.endpoint.send_post(body, more).await?, has_sid))
    }

    /// Sends a request. Not bounded here: the session bounds the whole exchange with its
    /// request deadline.
    pub(crate) async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        let is_init = msg.is(&Method::Initialize);
        let (resp, has_sid) = self.post(msg.into_raw()).await?;
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && has_sid {
            return Err(UpstreamError::SessionGone);
        }
        if !status.is_success() {
            return self.error_reply(resp).await;
        }
        if is_init {
            if let Some(sid) = resp.headers().get(mcp::SESSION_ID_HEADER) {
                let _ = self.state.session_id.set(sid.clone());
            }
            self.state.initialized.store(true, Ordering::Release);
            self.state.ready.notify_waiters();
        }
        let replies = if is_event_stream(resp.headers()) {
            Replies::stream(
                request_stream(
                    resp.into_body(),
                    self.getter(),
                    self.label.clone(),
                    self.timeouts.request,
                )
                .boxed(),
                self.sink.clone(),
                self.tasks.clone(),
            )
        } else {
            let body = crate::whole(resp.into_body()).await?;
            let m = Message::parse(body)?;
            Replies::one(m)
        };
        if is_init {
            let state = self.state.clone();
            Ok(replies.on_response(move |m| {
                if let Some(v) = m
                    .result_str("protocolVersion")
                    .and_then(|v| HeaderValue::from_str(&v).ok())
                {
                    let _ = state.version.set(v);
                }
            }))
        } else {
            Ok(replies)
        }
    }

    pub(crate) async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        let timeout = self.timeouts.request;
        let (resp, has_sid) = tokio::time::timeout(timeout, self.post(msg.into_raw()))
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))??;
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && has_sid {
            return Err(UpstreamError::SessionGone);
        }
        if !status.is_success() {
            return Err(self.endpoint.status_error(status.as_u16(), resp.headers()));
        }
        // Read the (empty) body to its end so the connection is reused.
        let _ = tokio::time::timeout(timeout, resp.into_body().collect()).await;
        Ok(())
    }

    /// A failure status: pass a JSON-RPC error body through when the upstream sent one.
    async fn error_reply(&self, resp: Response<UpBody>) -> Result<Replies, UpstreamError> {
        let failure = self
            .endpoint
            .status_error(resp.status().as_u16(), resp.headers());
        let small = http_body::Body::size_hint(resp.body())
            .upper()
            .is_some_and(|n| n as usize <= MAX_ERROR_BODY);
        if small
            && let Ok(body) = resp.into_body().collect().await
            && let Ok(m) = Message::parse(body.to_bytes())
            && m.is_response()
            && m.id().is_some()
        {
            return Ok(Replies::one(m));
        }
        Err(failure)
    }

    fn getter(&self) -> Getter {
        Getter::new(self.endpoint.clone(), self.state.clone())
    }

    /// What the upstream said about its session: its `Mcp-Session-Id` and the negotiated
    /// version, once initialize was answered.
    pub(crate) fn session(&self) -> Option<Resumed> {
        if !self.state.initialized.load(Ordering::Acquire) {
            return None;
        }
        let text = |v: &HeaderValue| v.to_str().ok().map(str::to_owned);
        Some(Resumed {
            session_id: self.state.session_id.get().and_then(text),
            version: self.state.version.get().and_then(text).unwrap_or_default(),
        })
    }

    /// Whether this is a sealed session's upstream.
    pub(crate) fn is_sealed(&self) -> bool {
        self.sealed
    }

    pub(crate) fn listen(&self) {
        self.listen_from(None);
    }

    /// Opens the standalone GET; with `last`, resumes the upstream's stream after that
    /// event id (`Last-Event-ID`), replacing a GET this session has open.
    pub fn listen_from(&self, last: Option<String>) {
        if last.is_none() && self.listen.on.load(Ordering::Acquire) {
            return;
        }
        let cancel = self.cancel.child_token();
        let Some(generation) = self.listen.start(&cancel, last.is_some()) else {
            return;
        };
        let get = self.getter();
        let tag_ids = self.sealed;
        let state = self.listen.clone();
        let sink = self.sink.clone();
        let label = self.label.clone();
        let timeout = self.timeouts.request;
        self.opening.send_replace(true);
        let opening = self.opening.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = standalone_stream(get, sink, label, timeout, &opening, last, tag_ids) => {}
            }
            opening.send_replace(false);
            // A sealed session's stream that ended on its own (the upstream gave up on it,
            // another replica took it) can be opened again by its client's next GET.
            if tag_ids {
                state.clear(generation);
            }
        });
    }

    /// Stops the standalone GET (a sealed session whose client stream left this replica).
    pub fn unlisten(&self) {
        self.listen.stop();
    }

    /// Stops what this replica runs for the session and leaves the upstream session as it
    /// is (a sealed session: its client may go on through another replica).
    pub fn release(&self) -> Teardown {
        self.cancel.cancel();
        Teardown::Kept
    }

    /// Waits (bounded) while the standalone GET is being opened after initialize.
    pub(crate) async fn settled(&self) {
        if !self.state.initialized.load(Ordering::Acquire) || !*self.opening.borrow() {
            return;
        }
        let mut rx = self.opening.subscribe();
        let bound = self.timeouts.connect;
        let _ = tokio::time::timeout(bound, rx.wait_for(|opening| !*opening)).await;
    }

    pub(crate) async fn close(&self) -> Teardown {
        self.cancel.cancel();
        if self.state.session_id.get().is_none() {
            return Teardown::NothingToDelete(None);
        }
        let timeout = self.timeouts.delete;
        let deleting = async {
            let send = |auth: Option<HeaderValue>, _| {
                let req = self.endpoint.delete(|h| {
                    self.state.stamp(h);
                    if let Some(a) = auth {
                        h.insert(AUTHORIZATION, a);
                    }
                });
                self.endpoint.send(req)
            };
            let refused = |r: &Response<UpBody>| r.status() == StatusCode::UNAUTHORIZED;
            let r = credential::authorized(self.state.credential.as_ref(), send, refused).await?;
            let status = r.status().as_u16();
            // Read the (small) answer to its end: the connection is then reused.
            let _ = r.into_body().collect().await;
            Ok::<_, UpstreamError>(status)
        };
        match tokio::time::timeout(timeout, deleting).await {
            Err(_) => Teardown::DeleteTimedOut,
            Ok(Err(e)) => Teardown::DeleteFailed(Box::new(e)),
            Ok(Ok(200..=299)) => Teardown::Deleted,
            Ok(Ok(s @ (404 | 405))) => Teardown::NothingToDelete(Some(s)),
            Ok(Ok(s)) => Teardown::DeleteFailed(Box::new(UpstreamError::Status(s))),
        }
    }
}
