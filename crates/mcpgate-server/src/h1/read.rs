//! Reading a request: its head within `header_timeout`, its body within `body_timeout`.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{Request, StatusCode, Uri};
use mcpgate_h1::{BodyKind, Chunk, ChunkedDecoder, H1Error, Limits, RequestHead};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::{Connection, Incoming};
use crate::body::{self, ReqBody};
use crate::error::FrontError;
use crate::front::Front;

/// Body bytes the driver buffers before a handler runs, whatever `max_body` says (the
/// Inspector's API bodies may be larger than an MCP endpoint's).
const MIN_BODY_CAP: usize = 4 * 1024 * 1024;

/// Why a connection stops reading requests and answers (or not) before it closes.
pub(super) enum Refused {
    /// The head broke HTTP/1.1's rules: `400` (or `431`).
    Head(H1Error),
    /// The head did not arrive in time: `408`.
    HeadTimeout,
    /// The body could not be read as it must be (too large, too slow, malformed).
    Body(FrontError),
    /// The client went away mid-request: nothing to answer.
    Gone,
}

impl<I> Connection<I>
where
    I: AsyncRead + AsyncWrite + Unpin + Send,
{
    /// The next request, or `None` when the connection ends without one (the client
    /// closed, it stayed idle past `header_timeout`, or the drain found it idle).
    pub(super) async fn read_request(
        &mut self,
        front: &Arc<Front>,
        stop: &CancellationToken,
    ) -> Result<Option<Incoming>, Refused> {
        let Some(head) = self.read_head(front, stop).await? else {
            return Ok(None);
        };
        let bytes = self.rbuf.split_to(head.len).freeze();
        let (t0, t1) = (head.target.0 as usize, head.target.1 as usize);
        let uri = Uri::from_maybe_shared(bytes.slice(t0..t1))
            .map_err(|e| Refused::Head(H1Error::Target(e)))?;
        let headers = mcpgate_h1::header_map(&bytes, &self.fields).map_err(Refused::Head)?;
        let (body, unread) = self.read_body(front, &head).await?;
        let mut request = Request::new(body);
        *request.method_mut() = head.method.clone();
        *request.uri_mut() = uri;
        *request.version_mut() = head.version;
        *request.headers_mut() = headers;
        Ok(Some(Incoming {
            close: head.close || unread,
            head_only: head.method == http::Method::HEAD,
            request,
        }))
    }

    async fn read_head(
        &mut self,
        front: &Front,
        stop: &CancellationToken,
    ) -> Result<Option<RequestHead>, Refused> {
        let limits = Limits::default();
        let mut armed = false;
        loop {
            if !self.rbuf.is_empty() {
                match mcpgate_h1::parse_request(&self.rbuf, &limits, &mut self.fields) {
                    Ok(Some(head)) => return Ok(Some(head)),
                    Ok(None) => {}
                    Err(e) => return Err(Refused::Head(e)),
                }
            }
            if !armed {
                let at = Instant::now() + front.cfg.header_timeout;
                self.deadline.as_mut().reset(at);
                armed = true;
            }
            let idle = self.rbuf.is_empty();
            self.rbuf.reserve(4096);
            tokio::select! {
                biased;
                () = stop.cancelled(), if idle => return Ok(None),
                () = &mut self.deadline => {
                    debug!(peer = %self.info.peer, idle, "no complete request head within header_timeout; closed");
                    return if idle { Ok(None) } else { Err(Refused::HeadTimeout) };
                }
                n = self.io.read_buf(&mut self.rbuf) => match n {
                    Ok(0) | Err(_) if idle => return Ok(None),
                    Ok(0) | Err(_) => return Err(Refused::Gone),
                    Ok(_) => {}
                },
            }
        }
    }

    /// The body, read whole, and whether it was left unread (declared above what the
    /// driver buffers: the handler refuses it, and the connection closes after).
    async fn read_body(
        &mut self,
        front: &Front,
        head: &RequestHead,
    ) -> Result<(ReqBody, bool), Refused> {
        let cap = front.cfg.max_body.max(MIN_BODY_CAP);
        match head.body {
            BodyKind::Empty | BodyKind::UntilClose => Ok((ReqBody::empty(), false)),
            BodyKind::Length(n) if n > cap as u64 => Ok((ReqBody::unread(), true)),
            BodyKind::Length(n) => {
                // Fits in `usize`: it is at most `cap`.
                let n = n as usize;
                if self.rbuf.len() < n {
                    self.continue_if_asked(head).await?;
                    self.arm_body_deadline(front);
                    self.rbuf.reserve(n - self.rbuf.len());
                    while self.rbuf.len() < n {
                        self.read_body_bytes(front).await?;
                    }
                }
                Ok((ReqBody::whole(self.rbuf.split_to(n).freeze()), false))
            }
            BodyKind::Chunked => {
                self.continue_if_asked(head).await?;
                self.arm_body_deadline(front);
                let body = self.read_chunked(front, cap).await?;
                Ok((ReqBody::whole(body), false))
            }
        }
    }

    async fn read_chunked(&mut self, front: &Front, cap: usize) -> Result<Bytes, Refused> {
        let mut decoder = ChunkedDecoder::default();
        let mut body = BytesMut::new();
        loop {
            match decoder.decode(&mut self.rbuf) {
                Ok(Some(Chunk::End)) => return Ok(body.freeze()),
                Ok(Some(Chunk::Data(d))) if body.len() + d.len() > cap => {
                    info!(peer = %self.info.peer, cap, "chunked request body above the limit; 413, connection closed");
                    return Err(Refused::Body(FrontError::PayloadTooLarge(
                        front.cfg.max_body,
                    )));
                }
                Ok(Some(Chunk::Data(d))) => body.extend_from_slice(&d),
                Ok(None) => self.read_body_bytes(front).await?,
                Err(e) => {
                    info!(peer = %self.info.peer, error = %e, "malformed chunked request body; 400, connection closed");
                    return Err(Refused::Body(FrontError::BadRequest(
                        "could not read the request body",
                    )));
                }
            }
        }
    }

    /// `100 Continue`, when the client waits for it before it sends its body.
    async fn continue_if_asked(&mut self, head: &RequestHead) -> Result<(), Refused> {
        if head.expect_continue && self.rbuf.is_empty() {
            self.io
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .map_err(|_| Refused::Gone)?;
            self.io.flush().await.map_err(|_| Refused::Gone)?;
        }
        Ok(())
    }

    fn arm_body_deadline(&mut self, front: &Front) {
        let at = Instant::now() + front.cfg.body_timeout;
        self.deadline.as_mut().reset(at);
    }

    /// Reads more of a body before the body deadline.
    async fn read_body_bytes(&mut self, front: &Front) -> Result<(), Refused> {
        if self.rbuf.capacity() - self.rbuf.len() < 1024 {
            self.rbuf.reserve(16 * 1024);
        }
        tokio::select! {
            biased;
            n = self.io.read_buf(&mut self.rbuf) => match n {
                Ok(0) | Err(_) => {
                    debug!(peer = %self.info.peer, "client went away mid-body");
                    Err(Refused::Gone)
                }
                Ok(_) => Ok(()),
            },
            () = &mut self.deadline => {
                let deadline = front.cfg.body_timeout;
                front
                    .conns
                    .timeouts
                    .get_or_create(&crate::conn::Refusal { reason: "body" })
                    .inc();
                info!(peer = %self.info.peer, timeout = ?deadline, "request body not received in time; 408, connection closed");
                Err(Refused::Body(FrontError::BodyTimeout(deadline)))
            }
        }
    }

    /// Answers a refused request (if there is anything to answer) and closes gently: the
    /// answer is written, the write side shut, and what the client still sends drained
    /// for a moment, so that its unread bytes do not turn the close into a reset that
    /// destroys the answer.
    pub(super) async fn refuse(&mut self, refused: Refused) {
        let response = match refused {
            Refused::Gone => return,
            Refused::Head(e) => {
                info!(peer = %self.info.peer, error = %e, source = ?std::error::Error::source(&e), "request head refused; connection closed");
                let msg = match e.status() {
                    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "request head too large\n",
                    _ => "malformed or ambiguous HTTP/1.1 request\n",
                };
                body::text(e.status(), msg)
            }
            Refused::HeadTimeout => body::text(
                StatusCode::REQUEST_TIMEOUT,
                "request head not received in time\n",
            ),
            Refused::Body(e) => e.into_response(None),
        };
        let exchange = super::write::Exchange {
            version: http::Version::HTTP_11,
            head_only: false,
            close: true,
        };
        if self.write_response(exchange, response).await.is_ok() {
            self.linger().await;
        }
    }

    /// Shuts the write side and discards what the client still sends, for at most
    /// 500 ms or 256 KiB.
    pub(super) async fn linger(&mut self) {
        let _ = self.io.shutdown().await;
        let mut sink = [0u8; 8192];
        let mut left = 256 * 1024usize;
        let until = Instant::now() + std::time::Duration::from_millis(500);
        while left > 0 {
            match tokio::time::timeout_at(until, self.io.read(&mut sink)).await {
                Ok(Ok(n)) if n > 0 => left = left.saturating_sub(n),
                _ => return,
            }
        }
    }
}
