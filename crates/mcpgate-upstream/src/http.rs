//! Streamable HTTP upstream: one upstream MCP session per client session over a shared
//! reqwest connection pool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use mcpgate_jsonrpc::{Message, mcp};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use sse_stream::SseStream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::error::{Teardown, UpstreamError, chain};
use crate::replies::Replies;
use crate::sink::EventSink;
use crate::timeouts::Timeouts;

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// Largest error body read from an upstream that answered with a failure status.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// What the upstream told us about its session. Plain mutexes: held only to copy a
/// header value, never across an `.await`.
#[derive(Debug, Default)]
struct State {
    session_id: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    /// Set, and `ready` woken, once the upstream answered initialize (with or without a
    /// session id: a stateless server gives none).
    initialized: AtomicBool,
    ready: tokio::sync::Notify,
}

impl State {
    fn get(m: &Mutex<Option<HeaderValue>>) -> Option<HeaderValue> {
        m.lock().ok().and_then(|g| g.clone())
    }
    fn set(m: &Mutex<Option<HeaderValue>>, v: HeaderValue) {
        if let Ok(mut g) = m.lock() {
            *g = Some(v);
        }
    }
}

/// A dedicated Streamable HTTP upstream session.
#[derive(Debug)]
pub struct HttpUpstream {
    timeouts: Timeouts,
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    label: Arc<str>,
    state: Arc<State>,
    cancel: CancellationToken,
    sink: Arc<dyn EventSink>,
    listening: AtomicBool,
    /// Whether the standalone GET is being opened (`true`) — requests wait for it, so a
    /// server message sent in answer to them cannot reach the upstream's GET stream
    /// before that stream exists.
    opening: watch::Sender<bool>,
}

impl HttpUpstream {
    pub(crate) fn new(
        timeouts: Timeouts,
        client: reqwest::Client,
        url: String,
        headers: &[(String, String)],
        label: &str,
        cancel: CancellationToken,
        sink: Arc<dyn EventSink>,
    ) -> Result<Self, UpstreamError> {
        let url = reqwest::Url::parse(&url)
            .map_err(|e| UpstreamError::Connect(format!("bad upstream url {url}: {e}")))?;
        let map = crate::client::header_map(headers)?;
        Ok(HttpUpstream {
            timeouts,
            client,
            url,
            headers: map,
            label: Arc::from(label),
            state: Arc::default(),
            cancel,
            sink,
            listening: AtomicBool::new(false),
            opening: watch::channel(false).0,
        })
    }

    fn timeout(&self) -> Duration {
        self.timeouts.request
    }

    /// Headers every request of this session carries.
    fn session_headers(&self, req: reqwest::RequestBuilder) -> (reqwest::RequestBuilder, bool) {
        let mut req = req.headers(self.headers.clone());
        let sid = State::get(&self.state.session_id);
        let has_sid = sid.is_some();
        if let Some(sid) = sid {
            req = req.header(mcp::SESSION_ID_HEADER, sid);
        }
        if let Some(v) = State::get(&self.state.version) {
            req = req.header(mcp::PROTOCOL_VERSION_HEADER, v);
        }
        (req, has_sid)
    }

    async fn post(&self, body: Bytes) -> Result<(reqwest::Response, bool), UpstreamError> {
        let req = self
            .client
            .post(self.url.clone())
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let (req, has_sid) = self.session_headers(req);
        let resp = tokio::time::timeout(self.timeout(), req.send())
            .await
            .map_err(|_| UpstreamError::Timeout(self.timeout()))?
            .map_err(|e| UpstreamError::from_reqwest(&e, self.timeout()))?;
        Ok((resp, has_sid))
    }

    pub(crate) async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        let is_init = msg.method() == Some(mcp::INITIALIZE);
        let (resp, has_sid) = self.post(msg.raw().clone()).await?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND && has_sid {
            return Err(UpstreamError::SessionGone);
        }
        if !status.is_success() {
            return error_reply(resp, &self.url).await;
        }
        if is_init {
            if let Some(sid) = resp.headers().get(mcp::SESSION_ID_HEADER) {
                State::set(&self.state.session_id, sid.clone());
            }
            self.state.initialized.store(true, Ordering::Release);
            self.state.ready.notify_waiters();
        }
        let replies = if is_event_stream(resp.headers()) {
            Replies::stream(
                request_stream(resp, self.getter(), self.label.clone(), self.timeout()).boxed(),
                self.sink.clone(),
            )
        } else {
            let body = tokio::time::timeout(self.timeout(), resp.bytes())
                .await
                .map_err(|_| UpstreamError::Timeout(self.timeout()))?
                .map_err(|e| UpstreamError::from_reqwest(&e, self.timeout()))?;
            let m = Message::parse(body).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
            Replies::one(m)
        };
        if is_init {
            let state = self.state.clone();
            Ok(replies.on_response(move |m| {
                if let Some(v) = m
                    .result_str("protocolVersion")
                    .and_then(|v| HeaderValue::from_str(&v).ok())
                {
                    State::set(&state.version, v);
                }
            }))
        } else {
            Ok(replies)
        }
    }

    pub(crate) async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        let (resp, has_sid) = self.post(msg.into_raw()).await?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND && has_sid {
            return Err(UpstreamError::SessionGone);
        }
        if !status.is_success() {
            return Err(crate::client::status_error(&resp, &self.url));
        }
        Ok(())
    }

    /// Builds `GET`s of this session's stream (standalone, or resumed with
    /// `Last-Event-ID` added by the caller), each with the session's headers as they are
    /// when it is built.
    fn getter(&self) -> Getter {
        Getter {
            client: self.client.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            state: self.state.clone(),
        }
    }

    pub(crate) fn listen(&self) {
        if self.listening.swap(true, Ordering::AcqRel) {
            return;
        }
        let req = self.getter();
        let cancel = self.cancel.child_token();
        let sink = self.sink.clone();
        let label = self.label.clone();
        let timeout = self.timeout();
        self.opening.send_replace(true);
        let opening = self.opening.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = standalone_stream(req, sink, label, timeout, &opening) => {}
            }
            opening.send_replace(false);
        });
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
        let Some(sid) = State::get(&self.state.session_id) else {
            return Teardown::NothingToDelete(None);
        };
        let timeout = self.timeouts.delete;
        let (req, _) = self.session_headers(self.client.delete(self.url.clone()));
        let _ = sid;
        match tokio::time::timeout(timeout, req.send()).await {
            Err(_) => Teardown::DeleteTimedOut,
            Ok(Err(e)) => Teardown::DeleteFailed(chain(&e)),
            Ok(Ok(r)) if r.status().is_success() => Teardown::Deleted,
            Ok(Ok(r)) if matches!(r.status().as_u16(), 404 | 405) => {
                Teardown::NothingToDelete(Some(r.status().as_u16()))
            }
            Ok(Ok(r)) => Teardown::DeleteFailed(format!("HTTP {}", r.status().as_u16())),
        }
    }
}

fn is_event_stream(h: &HeaderMap) -> bool {
    h.get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// A failure status: pass a JSON-RPC error body through when the upstream sent one.
async fn error_reply(
    resp: reqwest::Response,
    configured: &reqwest::Url,
) -> Result<Replies, UpstreamError> {
    let failure = crate::client::status_error(&resp, configured);
    let small = resp
        .content_length()
        .is_none_or(|n| n as usize <= MAX_ERROR_BODY);
    if small
        && let Ok(body) = resp.bytes().await
        && let Ok(m) = Message::parse(body)
        && m.is_response()
        && m.id().is_some()
    {
        return Ok(Replies::one(m));
    }
    Err(failure)
}

/// Where an upstream SSE stream stands: the last event id seen and the server's retry
/// interval, which is what resuming it needs.
#[derive(Debug)]
struct Cursor {
    last_id: Option<String>,
    retry: Duration,
}

impl Default for Cursor {
    fn default() -> Self {
        Cursor {
            last_id: None,
            retry: DEFAULT_RETRY,
        }
    }
}

/// Reconnect delay when the server did not say (`retry:`).
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
/// Longest reconnect delay honoured.
const MAX_RETRY: Duration = Duration::from_secs(10);
/// Reconnects in a row without receiving anything before giving up.
const MAX_RESUMES: u32 = 3;

/// One SSE event as a JSON-RPC message (events without data, such as priming events, and
/// events that are not JSON-RPC yield nothing), updating the cursor.
fn decode(ev: sse_stream::Sse, cursor: &mut Cursor, label: &str) -> Option<Message> {
    if let Some(id) = ev.id {
        cursor.last_id = Some(id);
    }
    if let Some(ms) = ev.retry {
        cursor.retry = Duration::from_millis(ms).min(MAX_RETRY);
    }
    if ev.event.as_deref().is_some_and(|e| e != "message") {
        return None;
    }
    let data = ev.data.filter(|d| !d.is_empty())?;
    match Message::parse(Bytes::from(data)) {
        Ok(m) => Some(m),
        Err(e) => {
            warn!(session = %label, error = %e, "upstream sent a non-JSON-RPC SSE event; dropped");
            None
        }
    }
}

/// Resumes an upstream SSE stream: waits the server's retry interval, then `GET` with
/// `Last-Event-ID`.
async fn resume(
    get: &Getter,
    cursor: &Cursor,
    timeout: Duration,
) -> Result<reqwest::Response, UpstreamError> {
    tokio::time::sleep(cursor.retry).await;
    let mut req = get.build();
    if let Some(id) = &cursor.last_id {
        req = req.header(mcp::LAST_EVENT_ID_HEADER, id.as_str());
    }
    let resp = tokio::time::timeout(timeout, req.send())
        .await
        .map_err(|_| UpstreamError::Timeout(timeout))?
        .map_err(|e| UpstreamError::from_reqwest(&e, timeout))?;
    match resp.status().as_u16() {
        404 => Err(UpstreamError::SessionGone),
        s if !(200..300).contains(&s) => Err(crate::client::status_error(&resp, &get.url)),
        _ if !is_event_stream(resp.headers()) => Err(UpstreamError::Protocol(
            "resumed stream is not text/event-stream".into(),
        )),
        _ => Ok(resp),
    }
}

/// The messages of a request's SSE answer. When the stream breaks before the response and
/// the server gave event ids, it is resumed (`GET` + `Last-Event-ID`, after the server's
/// `retry`), so the client sees no gap. After the response the stream is read to its end
/// (what comes then is handed to the session by [`Replies`]).
fn request_stream(
    first: reqwest::Response,
    get: Getter,
    label: Arc<str>,
    timeout: Duration,
) -> impl futures::Stream<Item = Result<Message, UpstreamError>> + Send + 'static {
    async_stream::stream! {
        let mut cursor = Cursor::default();
        let mut resp = first;
        let mut resumes = 0;
        let mut answered = false;
        loop {
            let mut events = SseStream::from_bytes_stream(resp.bytes_stream());
            let failure = loop {
                match events.next().await {
                    None => break None,
                    Some(Err(e)) => break Some(UpstreamError::Io(e.to_string())),
                    Some(Ok(ev)) => {
                        if let Some(m) = decode(ev, &mut cursor, &label) {
                            resumes = 0;
                            answered |= m.is_response();
                            yield Ok(m);
                        }
                    }
                }
            };
            if answered {
                return;
            }
            if cursor.last_id.is_none() || resumes >= MAX_RESUMES {
                yield Err(failure.unwrap_or_else(|| UpstreamError::Protocol("upstream ended the stream without a response".into())));
                return;
            }
            resumes += 1;
            debug!(session = %label, last_event_id = ?cursor.last_id, "upstream request stream broke; resuming");
            match resume(&get, &cursor, timeout).await {
                Ok(r) => resp = r,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            }
        }
    }
}

/// Reads the upstream's standalone (GET) stream into the session's sink, reconnecting
/// (with `Last-Event-ID` when the server gave ids) when it drops, until the session ends,
/// the server says the session is gone (404) or offers no stream (405), or it fails
/// `MAX_RESUMES` times in a row.
async fn standalone_stream(
    get: Getter,
    sink: Arc<dyn EventSink>,
    label: Arc<str>,
    timeout: Duration,
    opening: &watch::Sender<bool>,
) {
    // A client can open its stream before the upstream session exists (the legacy SSE
    // front does, before initialize): wait for it.
    get.session_ready().await;
    let mut cursor = Cursor {
        retry: Duration::ZERO,
        ..Cursor::default()
    };
    let mut failures = 0;
    loop {
        let resp = match resume(&get, &cursor, timeout).await {
            Ok(r) => r,
            Err(UpstreamError::Status(405)) => {
                debug!(session = %label, "upstream offers no GET stream (405)");
                return;
            }
            Err(UpstreamError::SessionGone) => {
                sink.closed(UpstreamError::SessionGone);
                return;
            }
            Err(e) => {
                opening.send_replace(false);
                failures += 1;
                warn!(session = %label, error = %e, failures, "upstream GET stream failed");
                if failures >= MAX_RESUMES {
                    return;
                }
                cursor.retry = cursor.retry.max(DEFAULT_RETRY);
                continue;
            }
        };
        // The first answer (stream, 405, error) settles the opening: requests waiting
        // for it may go.
        opening.send_replace(false);
        let mut events = SseStream::from_bytes_stream(resp.bytes_stream());
        while let Some(Ok(ev)) = events.next().await {
            if let Some(m) = decode(ev, &mut cursor, &label) {
                failures = 0;
                sink.message(m);
            }
        }
        debug!(session = %label, last_event_id = ?cursor.last_id, "upstream GET stream dropped; reconnecting");
        failures += 1;
        if failures > MAX_RESUMES {
            return;
        }
        cursor.retry = cursor.retry.max(DEFAULT_RETRY);
    }
}

/// Builds `GET`s of one upstream session's stream.
#[derive(Debug, Clone)]
struct Getter {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    state: Arc<State>,
}

impl Getter {
    fn build(&self) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .get(self.url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream");
        if let Some(sid) = State::get(&self.state.session_id) {
            req = req.header(mcp::SESSION_ID_HEADER, sid);
        }
        if let Some(v) = State::get(&self.state.version) {
            req = req.header(mcp::PROTOCOL_VERSION_HEADER, v);
        }
        req
    }

    /// Waits until the upstream answered initialize.
    async fn session_ready(&self) {
        loop {
            let notified = self.state.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state.initialized.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}
