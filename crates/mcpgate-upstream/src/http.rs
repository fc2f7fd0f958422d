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
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::error::chain;
use crate::{Connector, EventSink, Replies, Teardown, UpstreamError};

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// Largest error body read from an upstream that answered with a failure status.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// What the upstream told us about its session. Plain mutexes: held only to copy a
/// header value, never across an `.await`.
#[derive(Debug, Default)]
struct State {
    session_id: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
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
    conn: Connector,
    url: reqwest::Url,
    headers: HeaderMap,
    label: Arc<str>,
    state: Arc<State>,
    cancel: CancellationToken,
    sink: Arc<dyn EventSink>,
    listening: AtomicBool,
}

impl HttpUpstream {
    pub(crate) fn new(
        conn: Connector,
        url: String,
        headers: &[(String, String)],
        label: &str,
        cancel: CancellationToken,
        sink: Arc<dyn EventSink>,
    ) -> Result<Self, UpstreamError> {
        let url = reqwest::Url::parse(&url)
            .map_err(|e| UpstreamError::Connect(format!("bad upstream url {url}: {e}")))?;
        let map = crate::connector::header_map(headers)?;
        Ok(HttpUpstream {
            conn,
            url,
            headers: map,
            label: Arc::from(label),
            state: Arc::default(),
            cancel,
            sink,
            listening: AtomicBool::new(false),
        })
    }

    fn timeout(&self) -> Duration {
        self.conn.timeouts.request
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
            .conn
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
            return error_reply(resp).await;
        }
        if is_init && let Some(sid) = resp.headers().get(mcp::SESSION_ID_HEADER) {
            State::set(&self.state.session_id, sid.clone());
        }
        let replies = if is_event_stream(resp.headers()) {
            Replies::stream(
                sse_messages(resp, self.label.clone()).boxed(),
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
            return Err(UpstreamError::Status(status.as_u16()));
        }
        Ok(())
    }

    pub(crate) fn listen(&self) {
        if self.listening.swap(true, Ordering::AcqRel) {
            return;
        }
        let (req, _) = self.session_headers(
            self.conn
                .client
                .get(self.url.clone())
                .header(ACCEPT, "text/event-stream"),
        );
        let Some(req) = req.try_clone() else { return };
        let cancel = self.cancel.child_token();
        let sink = self.sink.clone();
        let label = self.label.clone();
        let timeout = self.timeout();
        tokio::spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = standalone_stream(req, sink, label, timeout) => {}
            }
        });
    }

    pub(crate) async fn close(&self) -> Teardown {
        self.cancel.cancel();
        let Some(sid) = State::get(&self.state.session_id) else {
            return Teardown::NothingToDelete(None);
        };
        let timeout = self.conn.timeouts.delete;
        let (req, _) = self.session_headers(self.conn.client.delete(self.url.clone()));
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
async fn error_reply(resp: reqwest::Response) -> Result<Replies, UpstreamError> {
    let status = resp.status().as_u16();
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
    Err(UpstreamError::Status(status))
}

/// The JSON-RPC messages of an SSE response body. Events without data (priming events)
/// and events that are not JSON-RPC are skipped with a log line.
fn sse_messages(
    resp: reqwest::Response,
    label: Arc<str>,
) -> impl futures::Stream<Item = Result<Message, UpstreamError>> + Send + 'static {
    SseStream::from_bytes_stream(resp.bytes_stream()).filter_map(move |ev| {
        let label = label.clone();
        async move {
            match ev {
                Err(e) => Some(Err(UpstreamError::Io(e.to_string()))),
                Ok(sse) => {
                    if sse.event.as_deref().is_some_and(|e| e != "message") {
                        return None;
                    }
                    let data = sse.data.filter(|d| !d.is_empty())?;
                    match Message::parse(Bytes::from(data)) {
                        Ok(m) => Some(Ok(m)),
                        Err(e) => {
                            warn!(session = %label, error = %e, "upstream sent a non-JSON-RPC SSE event; dropped");
                            None
                        }
                    }
                }
            }
        }
    })
}

/// Reads the upstream's standalone (GET) stream into the session's event channel.
async fn standalone_stream(
    req: reqwest::RequestBuilder,
    sink: Arc<dyn EventSink>,
    label: Arc<str>,
    timeout: Duration,
) {
    let resp = match tokio::time::timeout(timeout, req.send()).await {
        Err(_) => {
            warn!(session = %label, "upstream GET stream timed out");
            return;
        }
        Ok(Err(e)) => {
            warn!(session = %label, error = %chain(&e), "upstream GET stream failed");
            return;
        }
        Ok(Ok(r)) => r,
    };
    match resp.status().as_u16() {
        405 => {
            debug!(session = %label, "upstream offers no GET stream (405)");
            return;
        }
        404 => {
            sink.closed(UpstreamError::SessionGone);
            return;
        }
        s if !(200..300).contains(&s) || !is_event_stream(resp.headers()) => {
            warn!(session = %label, status = s, "upstream GET stream refused");
            return;
        }
        _ => {}
    }
    let mut stream = std::pin::pin!(sse_messages(resp, label.clone()));
    while let Some(item) = stream.next().await {
        match item {
            Ok(m) => sink.message(m),
            Err(e) => {
                debug!(session = %label, error = %e, "upstream GET stream ended");
                return;
            }
        }
    }
    debug!(session = %label, "upstream GET stream closed by upstream");
}
