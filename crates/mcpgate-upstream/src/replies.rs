//! The stream of messages an upstream relates to one request.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use mcpgate_jsonrpc::Message;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use std::sync::Arc;

use crate::error::UpstreamError;
use crate::sink::EventSink;

/// A hook run on the response as it goes by.
type OnResponse = Box<dyn FnOnce(&Message) + Send + Sync>;

/// Messages related to one request, ending with its response. Dropping it abandons the
/// request (a late response is then discarded by the upstream side, never misdelivered).
pub struct Replies {
    inner: Inner,
    done: bool,
    on_response: Option<OnResponse>,
    /// The id the upstream knows the request by, when the gateway rewrote it (pipes).
    upstream_id: Option<mcpgate_jsonrpc::Id>,
}

enum Inner {
    /// One already-received message (an `application/json` answer).
    One(Option<Message>),
    /// An SSE answer being read.
    Stream(
        BoxStream<'static, Result<Message, UpstreamError>>,
        Arc<dyn EventSink>,
        TaskTracker,
    ),
    /// Messages routed to this request by a stdio reader; `_guard` unregisters the
    /// request when the stream is dropped.
    Channel {
        rx: mpsc::Receiver<Result<Message, UpstreamError>>,
        _guard: Box<dyn Send + Sync>,
    },
    /// Another request's replies, each passed through a function (a virtual server's
    /// member: ids and URIs crossing back, a failure turned into an answer).
    Mapped(BoxStream<'static, Result<Message, UpstreamError>>),
}

impl std::fmt::Debug for Replies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replies").field("done", &self.done).finish()
    }
}

impl Replies {
    /// The one message of an answer that is already here (a response).
    pub fn one(msg: Message) -> Self {
        Self::new(Inner::One(Some(msg)))
    }

    /// An SSE answer; what the server sends after the response goes to `sink`, read by
    /// a task of `tasks`.
    pub(crate) fn stream(
        s: BoxStream<'static, Result<Message, UpstreamError>>,
        sink: Arc<dyn EventSink>,
        tasks: TaskTracker,
    ) -> Self {
        Self::new(Inner::Stream(s, sink, tasks))
    }

    /// Replies another task sends on `rx`; `guard` is dropped with the stream (it
    /// unregisters the request, or stops the task).
    pub fn channel(
        rx: mpsc::Receiver<Result<Message, UpstreamError>>,
        guard: Box<dyn Send + Sync>,
    ) -> Self {
        Self::new(Inner::Channel { rx, _guard: guard })
    }

    /// These replies with `f` applied to each item (the stream still ends after the
    /// response, which `f` must keep a response).
    pub fn map(
        self,
        f: impl FnMut(Result<Message, UpstreamError>) -> Result<Message, UpstreamError> + Send + 'static,
    ) -> Self {
        let upstream_id = self.upstream_id.clone();
        let mut out = Self::new(Inner::Mapped(StreamExt::map(self, f).boxed()));
        out.upstream_id = upstream_id;
        out
    }

    fn new(inner: Inner) -> Self {
        Replies {
            inner,
            done: false,
            on_response: None,
            upstream_id: None,
        }
    }

    /// Records the id the upstream knows the request by.
    pub(crate) fn with_upstream_id(mut self, id: mcpgate_jsonrpc::Id) -> Self {
        self.upstream_id = Some(id);
        self
    }

    /// The id the upstream knows the request by, when the gateway rewrote it (stdio,
    /// legacy SSE); messages the upstream tags with it (a listen stream's
    /// `subscriptionId`) are mapped back with it.
    pub fn upstream_id(&self) -> Option<&mcpgate_jsonrpc::Id> {
        self.upstream_id.as_ref()
    }

    /// Takes the stream out, leaving an ended one in its place. Holding the returned
    /// value keeps the request registered (for a pipe upstream: its id mapping), e.g.
    /// until a cancellation for it has been sent.
    pub fn detach(&mut self) -> Replies {
        let inner = std::mem::replace(&mut self.inner, Inner::One(None));
        let mut out = Replies::new(inner);
        out.done = self.done;
        out.upstream_id = self.upstream_id.clone();
        self.done = true;
        out
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
            Inner::Stream(s, ..) | Inner::Mapped(s) => match s.as_mut().poll_next(cx) {
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
                if let Inner::Stream(..) = &this.inner {
                    // The server should end the stream right after the response; read that
                    // end in the background so the HTTP connection goes back to the pool
                    // instead of being torn down (bounded: a server that keeps the stream
                    // open loses the connection after a second). Anything sent after the
                    // response goes to the session like a standalone message.
                    if let Inner::Stream(mut rest, sink, tasks) =
                        std::mem::replace(&mut this.inner, Inner::One(None))
                    {
                        // Usually the end is already here (the event and the end of the
                        // body arrive together): no task then.
                        loop {
                            match rest.as_mut().poll_next(cx) {
                                Poll::Ready(None) | Poll::Ready(Some(Err(_))) => break,
                                Poll::Ready(Some(Ok(late))) => sink.message(late),
                                Poll::Pending => {
                                    tasks.spawn(drain(rest, sink));
                                    break;
                                }
                            }
                        }
                    }
                }
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

async fn drain(
    mut rest: BoxStream<'static, Result<Message, UpstreamError>>,
    sink: Arc<dyn EventSink>,
) {
    let bound = tokio::time::sleep(std::time::Duration::from_secs(1));
    tokio::pin!(bound);
    loop {
        tokio::select! {
            () = &mut bound => return,
            item = rest.next() => match item {
                None | Some(Err(_)) => return,
                // Late but not lost: it belongs to the session, like a standalone message.
                Some(Ok(m)) => sink.message(m),
            },
        }
    }
}
