//! One HTTP/1.1 connection to an upstream, driven by whoever is using it.
//!
//! There is no connection task: the request that holds a [`Conn`] polls its I/O (in
//! [`Conn::drive`]) while it waits for the answer, and the answer's body ([`Driven`])
//! keeps polling it while it is read — the way an event-loop proxy works. A request thus
//! costs no hop between tasks (and often none between threads) for its upstream half. A
//! connection whose answer has been read to the end goes back to its origin's idle queue;
//! one dropped earlier is closed (HTTP/1.1 cannot reuse it), which is also how a request
//! is cancelled upstream.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tracing::debug;

use crossbeam_queue::ArrayQueue;

use crate::error::{Cause, UpstreamError};

/// A plain or TLS socket.
pub(crate) enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A request body: the whole JSON-RPC message.
pub(crate) type ReqBody = Full<Bytes>;

/// One connection: hyper's request handle and the connection state machine, which the
/// holder drives.
pub(crate) struct Conn {
    pub(crate) tx: SendRequest<ReqBody>,
    wire: Pin<Box<Connection<TokioIo<Io>, ReqBody>>>,
    ended: bool,
    /// When it was last checked in.
    pub(crate) since: Instant,
    /// Answers it has carried to their end.
    pub(crate) served: u32,
}

impl Conn {
    pub(crate) fn new(tx: SendRequest<ReqBody>, wire: Connection<TokioIo<Io>, ReqBody>) -> Self {
        Conn {
            tx,
            wire: Box::pin(wire),
            ended: false,
            since: Instant::now(),
            served: 0,
        }
    }

    /// Does the I/O the connection can do now (write the request, read the answer into
    /// the body); `false` once the connection has ended.
    pub(crate) fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if self.ended {
            return false;
        }
        match self.wire.as_mut().poll(cx) {
            Poll::Pending => true,
            Poll::Ready(r) => {
                if let Err(e) = r {
                    debug!(error = %e, "upstream connection ended with an error");
                }
                self.ended = true;
                false
            }
        }
    }

    /// Whether it can carry another request.
    pub(crate) fn usable(&self) -> bool {
        !self.ended && !self.tx.is_closed()
    }
}

/// An origin's idle connections: a lock-free queue, so nothing is locked per request.
pub(crate) struct Idle(ArrayQueue<Conn>);

impl Idle {
    pub(crate) fn new(capacity: usize) -> Self {
        Idle(ArrayQueue::new(capacity))
    }

    /// An idle connection, if any (the caller checks it is still usable).
    pub(crate) fn pop(&self) -> Option<Conn> {
        self.0.pop()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Takes back a connection whose answer was read to the end.
    pub(crate) fn checkin(&self, mut conn: Conn) {
        if conn.usable() {
            conn.since = Instant::now();
            conn.served += 1;
            // A full queue drops the connection (it closes).
            let _ = self.0.push(conn);
        }
    }
}

/// A hyper error as an upstream error: a TLS failure named, anything else as I/O.
pub(crate) fn hyper_error(e: hyper::Error) -> UpstreamError {
    if let Some(tls) = mcpgate_tls::describe(&e) {
        return UpstreamError::Tls(tls);
    }
    UpstreamError::Io(Cause::new(e))
}

/// A response body that drives its connection while it is read and gives the connection
/// back to its origin's idle queue once read to the end.
pub(crate) struct Driven {
    body: Incoming,
    conn: Option<(Conn, Arc<Idle>)>,
}

impl Driven {
    pub(crate) fn new(body: Incoming, conn: Conn, idle: Arc<Idle>) -> Self {
        Driven {
            body,
            conn: Some((conn, idle)),
        }
    }

    fn give_back(&mut self) {
        if let Some((conn, idle)) = self.conn.take() {
            idle.checkin(conn);
        }
    }
}

impl Body for Driven {
    type Data = Bytes;
    type Error = UpstreamError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        let this = &mut *self;
        if let Some((conn, _)) = this.conn.as_mut() {
            conn.drive(cx);
        }
        let r = Pin::new(&mut this.body).poll_frame(cx);
        match &r {
            Poll::Ready(None) => this.give_back(),
            Poll::Ready(Some(Ok(_))) if this.body.is_end_stream() => this.give_back(),
            Poll::Ready(Some(Err(_))) => this.conn = None,
            _ => {}
        }
        r.map(|f| f.map(|f| f.map_err(hyper_error)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
