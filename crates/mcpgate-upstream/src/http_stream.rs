//! SSE from a Streamable HTTP upstream: a request's SSE answer (resumed with
//! `Last-Event-ID` when it breaks before the response) and the session's standalone GET
//! stream (reconnected while the session lives).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::HeaderValue;
use mcpgate_jsonrpc::{Message, mcp};
use sse_stream::SseStream;
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::endpoint::{Endpoint, is_event_stream};
use crate::error::{Cause, ProtocolError, UpstreamError};
use crate::http_state::State;
use crate::sink::EventSink;
use crate::transport::UpBody;

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

/// Builds `GET`s of one upstream session's stream, with the session's headers as they
/// are when each is built.
#[derive(Debug, Clone)]
pub(crate) struct Getter {
    endpoint: Arc<Endpoint>,
    state: Arc<State>,
}

impl Getter {
    pub(crate) fn new(endpoint: Arc<Endpoint>, state: Arc<State>) -> Self {
        Getter { endpoint, state }
    }

    /// Opens the stream (resumed after `cursor` when it has an id), after the server's
    /// retry interval; a `401` with a credential gets one renewed credential and one more try.
    async fn open(
        &self,
        cursor: &Cursor,
        timeout: Duration,
    ) -> Result<http::Response<UpBody>, UpstreamError> {
        tokio::time::sleep(cursor.retry).await;
        let send = |auth, _| self.send_get(cursor, auth, timeout);
        let refused = |r: &http::Response<UpBody>| r.status() == http::StatusCode::UNAUTHORIZED;
        let resp =
            crate::credential::authorized(self.state.credential.as_ref(), send, refused).await?;
        match resp.status().as_u16() {
            404 => Err(UpstreamError::SessionGone),
            s if !(200..300).contains(&s) => Err(self.endpoint.status_error(s, resp.headers())),
            _ if !is_event_stream(resp.headers()) => Err(ProtocolError::NotEventStream.into()),
            _ => Ok(resp),
        }
    }

    async fn send_get(
        &self,
        cursor: &Cursor,
        auth: Option<HeaderValue>,
        timeout: Duration,
    ) -> Result<http::Response<UpBody>, UpstreamError> {
        let req = self.endpoint.get(|h| {
            self.state.stamp(h);
            if let Some(a) = auth {
                h.insert(http::header::AUTHORIZATION, a);
            }
            if let Some(v) = cursor
                .last_id
                .as_deref()
                .and_then(|id| HeaderValue::from_str(id).ok())
            {
                h.insert(mcp::LAST_EVENT_ID_HEADER, v);
            }
        });
        tokio::time::timeout(timeout, self.endpoint.send(req))
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))?
    }
}

/// One SSE event as a JSON-RPC message (events without data, such as priming events, and
/// events that are not JSON-RPC yield nothing), updating the cursor.
fn decode(ev: sse_stream::Sse, cursor: &mut Cursor, label: &str) -> Option<Message> {
    decode_tagged(ev, cursor, label, false)
}

/// [`decode`], keeping the event's id on the message when `tag` is set.
fn decode_tagged(
    ev: sse_stream::Sse,
    cursor: &mut Cursor,
    label: &str,
    tag: bool,
) -> Option<Message> {
    let id = ev.id.as_deref().map(Arc::<str>::from);
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
        Ok(m) => Some(match id {
            Some(id) if tag => m.with_event_id(id),
            _ => m,
        }),
        Err(e) => {
            warn!(session = %label, error = %e, "upstream sent a non-JSON-RPC SSE event; dropped");
            None
        }
    }
}

/// The messages of a request's SSE answer. When the stream breaks before the response and
/// the server gave event ids, it is resumed (`GET` + `Last-Event-ID`, after the server's
/// `retry`), so the client sees no gap. After the response the stream is read to its end
/// (what comes then is handed to the session by [`crate::Replies`]).
pub(crate) fn request_stream(
    first: UpBody,
    get: Getter,
    label: Arc<str>,
    timeout: Duration,
) -> impl futures::Stream<Item = Result<Message, UpstreamError>> + Send + 'static {
    async_stream::stream! {
        let mut cursor = Cursor::default();
        let mut body = first;
        let mut resumes = 0;
        let mut answered = false;
        loop {
            let mut events = SseStream::new(body);
            let failure = loop {
                match events.next().await {
                    None => break None,
                    Some(Err(e)) => break Some(UpstreamError::Io(Cause::new(e))),
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
                yield Err(failure.unwrap_or(UpstreamError::Protocol(ProtocolError::NoResponse)));
                return;
            }
            resumes += 1;
            debug!(session = %label, last_event_id = ?cursor.last_id, "upstream request stream broke; resuming");
            match get.open(&cursor, timeout).await {
                Ok(r) => body = r.into_body(),
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
/// `MAX_RESUMES` times in a row. `last` resumes after that upstream event id; with
/// `tag_ids`, every message keeps the upstream's event id (sealed sessions).
pub(crate) async fn standalone_stream(
    get: Getter,
    sink: Arc<dyn EventSink>,
    label: Arc<str>,
    timeout: Duration,
    opening: &watch::Sender<bool>,
    last: Option<String>,
    tag_ids: bool,
) {
    // A client can open its stream before the upstream session exists (the legacy SSE
    // front does, before initialize): wait for it.
    get.state.ready().await;
    let mut cursor = Cursor {
        retry: Duration::ZERO,
        last_id: last,
    };
    let mut failures = 0;
    loop {
        let resp = match get.open(&cursor, timeout).await {
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
        let mut events = SseStream::new(resp.into_body());
        while let Some(Ok(ev)) = events.next().await {
            if let Some(m) = decode_tagged(ev, &mut cursor, &label, tag_ids) {
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
