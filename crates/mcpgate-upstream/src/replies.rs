//! The stream of messages an upstream relates to one request.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use mcpgate_jsonrpc::Message;
use tokio::sync::mpsc;

use crate::UpstreamError;

/// A hook run on the response as it goes by.
type OnResponse = Box<dyn FnOnce(&Message) + Send + Sync>;

/// Messages related to one request, ending with its response. Dropping it abandons the
/// request (a late response is then discarded by the upstream side, never misdelivered).
pub struct Replies {
    inner: Inner,
    done: bool,
    on_response: Option<OnResponse>,
}

enum Inner {
    /// One already-received message (an `application/json` answer).
    One(Option<Message>),
    /// An SSE answer being read.
    Stream(BoxStream<'static, Result<Message, UpstreamError>>),
    /// Messages routed to this request by a stdio reader; `_guard` unregisters the
    /// request when the stream is dropped.
    Channel {
        rx: mpsc::Receiver<Result<Message, UpstreamError>>,
        _guard: Box<dyn Send + Sync>,
    },
}

impl std::fmt::Debug for Replies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replies").field("done", &self.done).finish()
    }
}

impl Replies {
    pub(crate) fn one(msg: Message) -> Self {
        Self::new(Inner::One(Some(msg)))
    }

    pub(crate) fn stream(s: BoxStream<'static, Result<Message, UpstreamError>>) -> Self {
        Self::new(Inner::Stream(s))
    }

    pub(crate) fn channel(
        rx: mpsc::Receiver<Result<Message, UpstreamError>>,
        guard: Box<dyn Send + Sync>,
    ) -> Self {
        Self::new(Inner::Channel { rx, _guard: guard })
    }

    fn new(inner: Inner) -> Self {
        Replies {
            inner,
            done: false,
            on_response: None,
        }
    }

    /// Runs `f` on the response when it goes by (used to learn the negotiated version).
    pub(crate) fn on_response(mut self, f: impl FnOnce(&Message) + Send + Sync + 'static) -> Self {
        self.on_response = Some(Box::new(f));
        self
    }
}

impl Stream for Replies {
    type Item = Result<Message, UpstreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let next = match &mut this.inner {
            Inner::One(m) => m.take().map(Ok),
            Inner::Stream(s) => match s.as_mut().poll_next(cx) {
                Poll::Ready(v) => v,
                Poll::Pending => return Poll::Pending,
            },
            Inner::Channel { rx, .. } => match rx.poll_recv(cx) {
                Poll::Ready(v) => v,
                Poll::Pending => return Poll::Pending,
            },
        };
        match &next {
            Some(Ok(m)) if m.is_response() => {
                this.done = true;
                if let Some(f) = this.on_response.take() {
                    f(m);
                }
            }
            Some(Err(_)) | None => this.done = true,
            Some(Ok(_)) => {}
        }
        Poll::Ready(next)
    }
}
