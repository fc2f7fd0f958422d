//! A streamed call and the SSE body of a stream: the call runs as its own task, logging
//! its messages and its response on its stream whether or not a connection reads it; a
//! response body reads one stream (primed, and cut on purpose with
//! [`HttpOptions::cut_after`](super::HttpOptions::cut_after)).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::reply::{Body, BoxError};
use super::session::HttpSession;
use super::streams::{EventStream, Live, ReaderRx};
use super::{Abort, lock};
use crate::stats::OpenStreamGuard;
use crate::tools::Outcome;

/// The reconnection delay (ms) announced in a `retry:` field before a cut.
const CUT_RETRY_MS: u64 = 100;
/// How long a cut stream waits for what it sent to reach the socket before
/// the connection is aborted.
const CUT_FLUSH: Duration = Duration::from_millis(20);

/// A pending [`HttpOptions::cut_after`](super::HttpOptions::cut_after) for one POST
/// response stream.
pub(super) struct Cut {
    pub(super) after: usize,
    pub(super) armed: Arc<AtomicBool>,
}

/// Runs one streamed call to its end, logging its messages and its response
/// on `stream` whether or not a connection is reading it.
pub(super) async fn run_call(
    session: Arc<HttpSession>,
    stream: Arc<EventStream>,
    id: Value,
    method: String,
    params: Option<Value>,
    shutdown: CancellationToken,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let outcome = {
        let work = session.mcp.handle_request(&id, &method, params, Some(&tx));
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break None,
                Some(m) = rx.recv() => {
                    stream.push(&m, false);
                }
                o = &mut work => break Some(o),
            }
        }
    };
    while let Ok(m) = rx.try_recv() {
        stream.push(&m, false);
    }
    match outcome {
        Some(Outcome::Reply(body)) => {
            stream.push(&body, true);
            stream.finish();
        }
        Some(Outcome::Die) => stream.die(),
        Some(Outcome::Silent) | None => stream.finish(),
    }
    session.mcp.send_deferred();
    lock(&session.streams).retire(stream.num());
}

/// The body of an SSE response reading one stream: the priming event, if any,
/// then whatever the stream hands over until it lets go (or a cut).
pub(super) fn sse_body(
    mut rx: ReaderRx,
    priming: Option<Bytes>,
    cut: Option<Cut>,
    guard: Option<OpenStreamGuard>,
) -> Body {
    let stream = async_stream::stream! {
        let _guard = guard;
        if let Some(frame) = priming {
            yield Ok::<_, BoxError>(Frame::data(frame));
        }
        let mut sent = 0usize;
        loop {
            let cut_now = cut
                .as_ref()
                .is_some_and(|c| c.after == sent && c.armed.swap(false, Ordering::Relaxed));
            if cut_now {
                yield Ok(Frame::data(Bytes::from(format!("retry: {CUT_RETRY_MS}\n\n"))));
                // Let hyper write out what was sent before the abort.
                tokio::time::sleep(CUT_FLUSH).await;
                yield Err(Box::new(Abort) as BoxError);
                break;
            }
            let Some(item) = rx.recv().await else { break };
            match item {
                Live::Event { frame, response } => {
                    yield Ok(Frame::data(frame));
                    if !response {
                        sent += 1;
                    }
                }
                Live::Die => {
                    yield Err(Box::new(Abort) as BoxError);
                    break;
                }
            }
        }
    };
    StreamBody::new(stream).boxed_unsync()
}
