//! SSE response bodies: messages as events with resumable ids, keep-alive comments while
//! idle, and one final JSON-RPC error event when a request fails mid-stream.
//!
//! A request's stream is decoupled from the connection that opened it: a task owned by
//! the session pumps the exchange into the stream's [`EventLog`], and the response body
//! reads the log. If the client's connection drops, the request goes on (disconnection is
//! not cancellation) and the client can resume with `GET` + `Last-Event-ID`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Response};
use mcpgate_jsonrpc::{Message, mcp, sse};
use mcpgate_session::{EventLog, Exchange, Listener, Session, StreamGauge};

use crate::body::Body;
use crate::error::FrontError;
use crate::pump::Pump;

/// How a sealed session's standalone events that carry an upstream event id are named:
/// `u:{upstream id}` (a GET with such a `Last-Event-ID` resumes the upstream's stream).
pub(crate) const UPSTREAM_EVENT: &str = "u:";

/// A `200 text/event-stream` response with the usual anti-buffering headers.
pub(crate) fn response(body: Body) -> Response<Body> {
    crate::body::event_stream(body)
}

/// Whether the client speaks a protocol version that expects a priming event (an event
/// id with empty data) at the start of each stream: 2025-11-25 and later.
pub(crate) fn wants_priming(h: &HeaderMap) -> bool {
    h.get(mcp::PROTOCOL_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= "2025-11-25")
}

fn priming_event(id: &str) -> Bytes {
    Bytes::from(format!("id: {id}\nretry: 1000\ndata: \n\n"))
}

/// Marks a log complete when the pump ends, however it ends (answered, failed, or
/// cancelled with its session).
struct FinishOnDrop(Arc<EventLog>);

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// Starts a request stream: `first` (already received), then the rest of the exchange,
/// pumped into a new log by a task the session owns. Returns the response body.
pub(crate) fn request_stream(
    session: &Arc<Session>,
    first: Vec<Message>,
    mut ex: Exchange,
    priming: bool,
    every: Duration,
) -> Body {
    let Some(log) = session.new_stream_log() else {
        return crate::body::empty();
    };
    for m in first {
        log.push(m.into_raw());
    }
    let guard = FinishOnDrop(log.clone());
    session.spawn(async move {
        let _guard = guard;
        while let Some(item) = ex.next().await {
            match item {
                Ok(m) => {
                    _guard.0.push(m.into_raw());
                }
                Err(e) => {
                    _guard
                        .0
                        .push(FrontError::from(e).to_jsonrpc().to_body(ex.request_id()));
                    break;
                }
            }
        }
    });
    log_body(log, 1, Out::of(session, every, priming))
}

/// How one of a session's streams goes to its client: how often it is kept alive,
/// whether it starts with a priming event, and the gauge that counts it open.
pub(crate) struct Out {
    pub(crate) every: Duration,
    pub(crate) priming: bool,
    pub(crate) gauge: Option<StreamGauge>,
}

impl Out {
    /// A stream of `session` kept alive every `every`, primed when `priming`.
    pub(crate) fn of(session: &Session, every: Duration, priming: bool) -> Self {
        Out {
            every,
            priming,
            gauge: session.sse_stream(),
        }
    }
}

/// A body that sends the events of `log` from sequence number `from` on, until the log
/// is complete.
pub(crate) fn log_body(log: Arc<EventLog>, from: u64, out: Out) -> Body {
    let Out {
        every,
        priming,
        gauge,
    } = out;
    Pump::every(every).body(async_stream::stream! {
        let _gauge = gauge;
        if priming {
            yield priming_event(&log.event_id(from.saturating_sub(1)));
        }
        let mut cursor = from;
        while let Some((seq, data)) = log.next_from(cursor).await {
            if seq > cursor {
                // The client reads more slowly than the upstream writes: these events
                // fell out of the replay log before it read them.
                log.reader_lost(seq - cursor);
                tracing::warn!(stream = log.stream(), lost = seq - cursor, "slow client lost events of its stream");
            }
            cursor = seq + 1;
            yield sse::message_event(Some(&log.event_id(seq)), &data);
        }
    })
}

/// The body of the standalone GET stream: first what the log holds after `resume_from`
/// (a client resuming), then live messages, each recorded in the log before it is sent.
pub(crate) fn listener_body(
    mut l: Listener,
    log: Arc<EventLog>,
    resume_from: Option<u64>,
    out: Out,
) -> Body {
    let Out {
        every,
        priming,
        gauge,
    } = out;
    Pump::every(every).body(async_stream::stream! {
        let _gauge = gauge;
        if let Some(from) = resume_from {
            let mut cursor = from;
            while let Some((seq, data)) = log.next_ready_from(cursor) {
                cursor = seq + 1;
                yield sse::message_event(Some(&log.event_id(seq)), &data);
            }
        } else if priming {
            yield priming_event(&log.event_id(log.last_seq()));
        }
        while let Some(m) = l.recv().await {
            // A sealed session's message with the upstream's event id is named by it (any
            // replica resumes the upstream's stream after it); the others are logged here
            // for a client resuming on this replica.
            match m.event_id().map(|u| format!("{UPSTREAM_EVENT}{u}")) {
                Some(id) => yield sse::message_event(Some(&id), m.raw()),
                None => {
                    let data = m.into_raw();
                    let seq = log.push(data.clone());
                    yield sse::message_event(Some(&log.event_id(seq)), &data);
                }
            }
        }
    })
}
