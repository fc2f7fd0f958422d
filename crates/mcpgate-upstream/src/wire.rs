//! One HTTP/1.1 connection to an upstream, on `mcpgate-h1`.
//!
//! There is no connection task and no second codec: the request that holds a [`Conn`]
//! writes its head and body in one write and reads the answer's head from the socket
//! itself; the answer's body ([`H1Body`]) reads the rest as it is polled — the way an
//! event-loop proxy works. A request thus costs no hop between tasks (and often none
//! between threads) for its upstream half, and no header map on the way out. A
//! connection whose answer has been read to the end goes back to its origin's idle queue;
//! one dropped earlier is closed (HTTP/1.1 cannot reuse it), which is also how a request
//! is cancelled upstream.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use http_body::{Body, Frame, SizeHint};
use mcpgate_h1::{BodyKind, BodyLength, Chunk, ChunkedDecoder, Field, H1Error, ResponseHead};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

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

/// A request as it is written: what the session encoded once (`pre`), the few fields
/// that change per request (`more`), any other fields as a map, and the body.
pub(crate) struct Outgoing<'a> {
    pub(crate) method: &'a Method,
    /// The origin-form target (a followed redirect changes it).
    pub(crate) target: Uri,
    /// Fields already encoded (`name: value\r\n` each).
    pub(crate) pre: &'a [u8],
    /// Per-request fields (a session id, a protocol version).
    pub(crate) more: [Option<(&'a HeaderName, &'a HeaderValue)>; 3],
    /// Any other fields (framing and `Connection` fields are left out).
    pub(crate) headers: Option<&'a HeaderMap>,
    /// Whether `pre` or `headers` carry `Host` (else the origin's is written).
    pub(crate) has_host: bool,
    pub(crate) body: &'a Bytes,
}

/// Read buffer growth step.
const READ_SIZE: usize = 8 * 1024;
/// Bodies up to this size are copied after the head and written with it in one write.
const COALESCE: usize = 64 * 1024;

/// One connection: its socket and its buffers, reused by every request it carries.
pub(crate) struct Conn {
    io: Io,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
    fields: Vec<Field>,
    /// When it was last checked in.
    pub(crate) since: Instant,
    /// Answers it has carried to their end.
    pub(crate) served: u32,
}

/// Why a request on a connection got no answer head.
#[derive(Debug)]
pub(crate) enum Failed {
    /// The write failed (the connection was found closed under it).
    Write(io::Error),
    /// The connection closed or was reset before any byte of an answer.
    ClosedBeforeAnswer(Option<io::Error>),
    /// Anything else: an I/O error after part of an answer, a malformed answer.
    Other(UpstreamError),
}

impl Failed {
    pub(crate) fn into_error(self) -> UpstreamError {
        match self {
            Failed::Write(e) | Failed::ClosedBeforeAnswer(Some(e)) => io_error(e),
            Failed::ClosedBeforeAnswer(None) => io_error(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the upstream closed the connection before answering",
            )),
            Failed::Other(e) => e,
        }
    }
}

/// An I/O error as an upstream error: a TLS failure named.
pub(crate) fn io_error(e: io::Error) -> UpstreamError {
    if let Some(tls) = mcpgate_tls::describe(&e) {
        return UpstreamError::Tls(tls);
    }
    UpstreamError::Io(Cause::new(e))
}

fn h1_error(e: H1Error) -> UpstreamError {
    UpstreamError::Io(Cause::new(e))
}

impl Conn {
    pub(crate) fn new(io: Io) -> Self {
        Conn {
            io,
            rbuf: BytesMut::with_capacity(READ_SIZE),
            wbuf: Vec::with_capacity(1024),
            fields: Vec::new(),
            since: Instant::now(),
            served: 0,
        }
    }

    /// Whether an idle connection is still open: nothing arrived while it waited (an
    /// unsolicited byte, an end-of-file or an error each make it unusable).
    pub(crate) fn still_open(&mut self, cx: &mut Context<'_>) -> bool {
        matches!(self.poll_fill(cx), Poll::Pending)
    }

    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_SIZE / 4 {
            self.rbuf.reserve(READ_SIZE);
        }
        let read = self.io.read_buf(&mut self.rbuf);
        std::pin::pin!(read).poll(cx)
    }

    /// Writes a request (`host`: the origin's encoded `Host` field, written unless the
    /// request carries its own), its body after its head in one write when small.
    pub(crate) async fn write_request(
        &mut self,
        host: &[u8],
        out: &Outgoing<'_>,
    ) -> Result<(), Failed> {
        self.wbuf.clear();
        let target = out
            .target
            .path_and_query()
            .map_or(b"/".as_slice(), |pq| pq.as_str().as_bytes());
        let w = &mut self.wbuf;
        mcpgate_h1::encode_request_line(w, out.method, target);
        if !out.has_host {
            w.extend_from_slice(host);
        }
        w.extend_from_slice(out.pre);
        for (name, value) in out.more.iter().flatten() {
            mcpgate_h1::field(w, name.as_str().as_bytes(), value.as_bytes());
        }
        if let Some(h) = out.headers {
            mcpgate_h1::encode_fields(w, h);
        }
        mcpgate_h1::encode_framing(w, BodyLength::Known(out.body.len() as u64));
        w.extend_from_slice(b"\r\n");
        let body = out.body;
        let coalesce = body.len() <= COALESCE;
        if coalesce {
            self.wbuf.extend_from_slice(body);
        }
        let r = async {
            self.io.write_all(&self.wbuf).await?;
            if !coalesce {
                self.io.write_all(body).await?;
            }
            self.io.flush().await
        };
        r.await.map_err(Failed::Write)
    }

    /// Reads the answer's head (interim `1xx` answers skipped) to a `method` request.
    pub(crate) async fn read_head(&mut self, method: &Method) -> Result<ResponseHead, Failed> {
        let mut any = false;
        loop {
            match mcpgate_h1::parse_response(&self.rbuf, method == Method::HEAD, &mut self.fields) {
                Ok(Some(h)) if h.is_interim() => {
                    let _ = self.rbuf.split_to(h.len);
                    any = true;
                    continue;
                }
                Ok(Some(h)) => return Ok(h),
                Ok(None) => {}
                Err(e) => return Err(Failed::Other(h1_error(e))),
            }
            any |= !self.rbuf.is_empty();
            match std::future::poll_fn(|cx| self.poll_fill(cx)).await {
                Ok(0) if !any => return Err(Failed::ClosedBeforeAnswer(None)),
                Ok(0) => {
                    return Err(Failed::Other(h1_error(H1Error::Incomplete)));
                }
                Ok(_) => {}
                Err(e) if !any && closed(&e) => return Err(Failed::ClosedBeforeAnswer(Some(e))),
                Err(e) => return Err(Failed::Other(io_error(e))),
            }
        }
    }

    /// The head just read, as status and header map (its bytes taken from the buffer).
    pub(crate) fn take_head(
        &mut self,
        head: &ResponseHead,
    ) -> Result<http::HeaderMap, UpstreamError> {
        let bytes = self.rbuf.split_to(head.len).freeze();
        mcpgate_h1::header_map(&bytes, &self.fields).map_err(h1_error)
    }

    /// When the whole body is already buffered: takes it (the connection is then free).
    pub(crate) fn take_whole(&mut self, kind: BodyKind) -> Option<Bytes> {
        match kind {
            BodyKind::Empty => Some(Bytes::new()),
            BodyKind::Length(n) if (self.rbuf.len() as u64) >= n => {
                Some(self.rbuf.split_to(n as usize).freeze())
            }
            _ => None,
        }
    }

    /// Whether it can carry another request (nothing unread left behind).
    pub(crate) fn reusable(&self) -> bool {
        self.rbuf.is_empty()
    }
}

/// Whether `e` is the peer closing or resetting the connection.
fn closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof
    )
}

/// An origin's idle connections: a lock-free queue, so nothing is locked per request.
pub(crate) struct Idle(ArrayQueue<Conn>);

impl Idle {
    pub(crate) fn new(capacity: usize) -> Self {
        Idle(ArrayQueue::new(capacity))
    }

    /// An idle connection, if any (the caller checks it is still open).
    pub(crate) fn pop(&self) -> Option<Conn> {
        self.0.pop()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Takes back a connection whose answer was read to the end.
    pub(crate) fn checkin(&self, mut conn: Conn) {
        if conn.reusable() {
            conn.since = Instant::now();
            conn.served += 1;
            // A full queue drops the connection (it closes).
            let _ = self.0.push(conn);
        }
    }
}

/// What is left of a body.
enum Left {
    Length(u64),
    Chunked(ChunkedDecoder),
    UntilClose,
    Done,
}

/// A response body read from its connection as it is polled; the connection goes back to
/// its origin's idle queue once the body is read to the end (unless it must close).
pub(crate) struct H1Body {
    conn: Option<Conn>,
    left: Left,
    /// The connection to give it back to (`None`: it closes after this answer).
    idle: Option<Arc<Idle>>,
    /// A body taken whole at the head, not yet yielded.
    whole: Option<Bytes>,
}

impl H1Body {
    /// A body already read whole (the connection was given back).
    pub(crate) fn whole(b: Bytes) -> Self {
        H1Body {
            conn: None,
            left: Left::Done,
            idle: None,
            whole: (!b.is_empty()).then_some(b),
        }
    }

    /// A body still on `conn`, framed by `kind`; `idle` takes the connection back after.
    pub(crate) fn streaming(conn: Conn, kind: BodyKind, idle: Option<Arc<Idle>>) -> Self {
        let left = match kind {
            BodyKind::Empty | BodyKind::Length(0) => Left::Done,
            BodyKind::Length(n) => Left::Length(n),
            BodyKind::Chunked => Left::Chunked(ChunkedDecoder::default()),
            BodyKind::UntilClose => Left::UntilClose,
        };
        let idle = if matches!(left, Left::UntilClose) {
            None
        } else {
            idle
        };
        H1Body {
            conn: Some(conn),
            left,
            idle,
            whole: None,
        }
    }

    fn finish(&mut self) {
        self.left = Left::Done;
        if let (Some(conn), Some(idle)) = (self.conn.take(), self.idle.take()) {
            idle.checkin(conn);
        }
    }

    /// What the buffer holds of the body now, if anything.
    fn buffered(&mut self) -> Result<Option<Bytes>, UpstreamError> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(None);
        };
        match &mut self.left {
            Left::Length(n) if !conn.rbuf.is_empty() => {
                let take = (*n).min(conn.rbuf.len() as u64);
                let b = conn.rbuf.split_to(take as usize).freeze();
                *n -= take;
                if *n == 0 {
                    self.finish();
                }
                Ok(Some(b))
            }
            Left::Chunked(d) => match d.decode(&mut conn.rbuf).map_err(h1_error)? {
                Some(Chunk::Data(b)) => Ok(Some(b)),
                Some(Chunk::End) => {
                    self.finish();
                    Ok(None)
                }
                None => Ok(None),
            },
            Left::UntilClose if !conn.rbuf.is_empty() => Ok(Some(conn.rbuf.split().freeze())),
            _ => Ok(None),
        }
    }
}

impl Body for H1Body {
    type Data = Bytes;
    type Error = UpstreamError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        let this = &mut *self;
        if let Some(b) = this.whole.take() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        loop {
            match this.buffered() {
                Ok(Some(b)) => return Poll::Ready(Some(Ok(Frame::data(b)))),
                Ok(None) => {}
                Err(e) => {
                    this.conn = None;
                    this.left = Left::Done;
                    return Poll::Ready(Some(Err(e)));
                }
            }
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            if matches!(this.left, Left::Done) {
                return Poll::Ready(None);
            }
            match conn.poll_fill(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    this.conn = None;
                    let ended = matches!(this.left, Left::UntilClose);
                    this.left = Left::Done;
                    return Poll::Ready((!ended).then(|| Err(h1_error(H1Error::Incomplete))));
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => {
                    this.conn = None;
                    this.left = Left::Done;
                    return Poll::Ready(Some(Err(io_error(e))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.whole.is_none() && matches!(self.left, Left::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.whole, &self.left) {
            (Some(b), _) => SizeHint::with_exact(b.len() as u64),
            (None, Left::Length(n)) => SizeHint::with_exact(*n),
            (None, Left::Done) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
