//! SSE response bodies: messages as events, keep-alive comments while idle, and one
//! final JSON-RPC error event when a request fails mid-stream.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use mcpgate_jsonrpc::{Message, sse};
use mcpgate_session::{Exchange, Listener};
use tokio::time::MissedTickBehavior;

use crate::FrontError;
use crate::body::Body;

/// A `200 text/event-stream` response with the usual anti-buffering headers.
pub(crate) fn response(body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

fn frames<S>(s: S) -> Body
where
    S: Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + 'static,
{
    StreamBody::new(s).boxed_unsync()
}

fn keep_alive(every: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

/// The body of a POST answered as a stream: `first` (already received), then the rest of
/// the exchange.
pub(crate) fn exchange_body(first: Vec<Message>, mut ex: Exchange, every: Duration) -> Body {
    frames(async_stream::stream! {
        for m in first {
            yield Ok(Frame::data(sse::message_event(None, m.raw())));
        }
        let mut tick = keep_alive(every);
        loop {
            tokio::select! {
                item = ex.next() => match item {
                    None => break,
                    Some(Ok(m)) => yield Ok(Frame::data(sse::message_event(None, m.raw()))),
                    Some(Err(e)) => {
                        let body = FrontError::from(e).to_jsonrpc().to_body(ex.request_id());
                        yield Ok(Frame::data(sse::message_event(None, &body)));
                        break;
                    }
                },
                _ = tick.tick() => yield Ok(Frame::data(Bytes::from_static(sse::KEEP_ALIVE))),
            }
        }
    })
}

/// The body of the standalone GET stream.
pub(crate) fn listener_body(mut l: Listener, every: Duration) -> Body {
    frames(async_stream::stream! {
        let mut tick = keep_alive(every);
        loop {
            tokio::select! {
                m = l.recv() => match m {
                    Some(m) => yield Ok(Frame::data(sse::message_event(None, m.raw()))),
                    None => break,
                },
                _ = tick.tick() => yield Ok(Frame::data(Bytes::from_static(sse::KEEP_ALIVE))),
            }
        }
    })
}
