//! The one stream pump behind every streaming answer (a request's SSE stream, the GET
//! stream, the legacy SSE stream, a 2026-07-28 answer relayed or translated, a listen
//! stream): it sends what its source yields as it comes, a keep-alive comment whenever the
//! stream has been idle for `every` at an event boundary, and ends the stream — with a
//! last event, when there is one — once the gateway drains. What differs between the
//! answers is their source, a plain stream of frames.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body::Frame;
use http_body_util::StreamBody;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::body::Body;

/// How a pumped stream is kept alive and ended.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pump {
    /// Keep-alive comments after this much silence (`None`: none; not an event stream).
    pub(crate) every: Option<Duration>,
    /// Cancelled when the gateway drains: the stream ends then.
    pub(crate) closing: Option<CancellationToken>,
    /// What the stream's last event is when the drain ends it.
    pub(crate) farewell: Option<Bytes>,
}

impl Pump {
    /// Keep-alive comments every `every`.
    pub(crate) fn every(every: Duration) -> Self {
        Pump {
            every: Some(every),
            ..Pump::default()
        }
    }

    /// Ends with the drain.
    pub(crate) fn until(mut self, closing: CancellationToken) -> Self {
        self.closing = Some(closing);
        self
    }

    /// Says `last` when the drain ends it.
    pub(crate) fn farewell(mut self, last: Bytes) -> Self {
        self.farewell = Some(last);
        self
    }

    /// The response body that pumps `source`.
    pub(crate) fn body<S>(self, source: S) -> Body
    where
        S: Stream<Item = Bytes> + Send + 'static,
    {
        Body::stream(StreamBody::new(self.frames(source)))
    }

    fn frames<S>(self, source: S) -> impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Send
    where
        S: Stream<Item = Bytes> + Send + 'static,
    {
        let Pump {
            every,
            closing,
            farewell,
        } = self;
        async_stream::stream! {
            let source = source;
            futures::pin_mut!(source);
            let closing = closing.unwrap_or_default();
            let period = every.unwrap_or(Duration::from_secs(3600));
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
            // Whether what was sent so far ends at an event boundary (a blank line), where
            // a comment may go.
            let mut boundary = Boundary::default();
            loop {
                tokio::select! {
                    () = closing.cancelled() => {
                        if let Some(last) = farewell {
                            yield Ok(Frame::data(last));
                        }
                        break;
                    }
                    item = source.next() => match item {
                        Some(b) if b.is_empty() => {}
                        Some(b) => {
                            boundary.saw(&b);
                            tick.reset();
                            yield Ok(Frame::data(b));
                        }
                        None => break,
                    },
                    _ = tick.tick(), if every.is_some() && boundary.at() => {
                        yield Ok(Frame::data(Bytes::from_static(mcpgate_jsonrpc::sse::KEEP_ALIVE)));
                    }
                }
            }
        }
    }
}

/// Runs a closure once, when dropped (the end of an answer, however it ends).
pub(crate) struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnDrop<F> {
    /// Runs `f` when dropped.
    pub(crate) fn new(f: F) -> Self {
        OnDrop(Some(f))
    }
}

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// The last bytes sent, to tell whether the stream is between events.
#[derive(Debug)]
struct Boundary([u8; 4]);

impl Default for Boundary {
    fn default() -> Self {
        Boundary(*b"\r\n\r\n")
    }
}

impl Boundary {
    fn saw(&mut self, b: &[u8]) {
        for x in b.iter().rev().take(4).rev() {
            self.0 = [self.0[1], self.0[2], self.0[3], *x];
        }
    }

    fn at(&self) -> bool {
        self.0[2..] == *b"\n\n" || self.0 == *b"\r\n\r\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_are_blank_lines() {
        let mut b = Boundary::default();
        assert!(b.at());
        b.saw(b"data: {}\n");
        assert!(!b.at());
        b.saw(b"\n");
        assert!(b.at());
        b.saw(b"event: x\r\n\r\n");
        assert!(b.at());
        b.saw(b"data: {\"a\":");
        assert!(!b.at());
    }

    #[tokio::test]
    async fn idle_streams_get_comments_and_the_drain_a_farewell() {
        let closing = CancellationToken::new();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
        let source = tokio_stream_from(rx);
        let pump = Pump::every(Duration::from_millis(20))
            .until(closing.clone())
            .farewell(Bytes::from_static(b"data: bye\n\n"));
        let frames = pump.frames(source);
        futures::pin_mut!(frames);
        tx.send(Bytes::from_static(b"data: 1\n\n")).unwrap();
        let first = frames.next().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"data: 1\n\n");
        let idle = frames.next().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&idle[..], mcpgate_jsonrpc::sse::KEEP_ALIVE);
        closing.cancel();
        let last = frames.next().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&last[..], b"data: bye\n\n");
        assert!(frames.next().await.is_none());
    }

    fn tokio_stream_from(
        mut rx: tokio::sync::mpsc::UnboundedReceiver<Bytes>,
    ) -> impl Stream<Item = Bytes> + Send + 'static {
        async_stream::stream! {
            while let Some(b) = rx.recv().await {
                yield b;
            }
        }
    }
}
