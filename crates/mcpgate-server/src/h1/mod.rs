//! The front's HTTP/1.1 connection driver, on `mcpgate-h1`: it reads a request head into
//! the connection's reused buffer, reads the body whole (bounded in size and time),
//! hands the request to [`Front::handle`], and writes the answer, streaming frames as
//! they come. Per connection, not per request: the read and write buffers, the field
//! vector and the deadline timer.
//!
//! What it guarantees, as hyper did before it:
//! - a client that goes away while its request is handled or its answer streams cancels
//!   the handler (it is dropped), so a vanished client's call is cancelled upstream;
//! - a head must arrive within `header_timeout` (also the bound on an idle keep-alive
//!   connection), a body within `body_timeout` (else `408`, counted, and closed);
//! - ambiguous framing, malformed heads, oversized heads (`431`) and broken chunked
//!   bodies are refused with a precise status and the connection closed;
//! - the drain: an idle connection closes at once, a busy one after its answer.

mod read;
mod write;

use std::pin::Pin;
use std::sync::Arc;

use bytes::BytesMut;
use http::{Request, Version};
use mcpgate_h1::Field;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::body::ReqBody;
use crate::front::{Conn, Front};

/// Bytes a connection reads ahead while a handler runs (a pipelined request); past this
/// it stops reading until the answer is written.
const READ_AHEAD: usize = 64 * 1024;

/// One client connection and what it reuses from one request to the next.
pub(crate) struct Connection<I> {
    io: I,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
    fields: Vec<Field>,
    deadline: Pin<Box<Sleep>>,
    info: Conn,
}

/// How an exchange left the connection.
enum Next {
    /// Read the next request.
    KeepAlive,
    /// Close it.
    Close,
}

impl<I> Connection<I>
where
    I: AsyncRead + AsyncWrite + Unpin + Send,
{
    pub(crate) fn new(io: I, info: Conn) -> Self {
        Connection {
            io,
            rbuf: BytesMut::with_capacity(8 * 1024),
            wbuf: Vec::with_capacity(8 * 1024),
            fields: Vec::with_capacity(16),
            deadline: Box::pin(tokio::time::sleep_until(Instant::now())),
            info,
        }
    }

    /// Serves requests until the client closes, an exchange ends the connection, or
    /// `stop` (the drain) finds it idle.
    pub(crate) async fn serve(mut self, front: &Arc<Front>, stop: &CancellationToken) {
        loop {
            let req = match self.read_request(front, stop).await {
                Ok(Some(req)) => req,
                Ok(None) => return,
                Err(refusal) => {
                    self.refuse(refusal).await;
                    return;
                }
            };
            match self.exchange(front, req, stop).await {
                Next::KeepAlive => {}
                Next::Close => {
                    self.linger().await;
                    return;
                }
            }
        }
    }

    /// Runs the handler of one request, watching the client, and writes its answer.
    async fn exchange(
        &mut self,
        front: &Arc<Front>,
        req: Incoming,
        stop: &CancellationToken,
    ) -> Next {
        let Incoming {
            request,
            close,
            head_only,
        } = req;
        let version = request.version();
        let handling = Arc::clone(front).handle(request, self.info);
        tokio::pin!(handling);
        let mut watching = true;
        let response = loop {
            tokio::select! {
                biased;
                r = &mut handling => break r,
                n = self.io.read_buf(&mut self.rbuf), if watching => match n {
                    Ok(0) | Err(_) => {
                        debug!(peer = %self.info.peer, "client went away before its answer; handler cancelled");
                        return Next::Close;
                    }
                    Ok(_) => watching = self.rbuf.len() < READ_AHEAD,
                },
            }
        };
        let close = close
            || version == Version::HTTP_10
            || stop.is_cancelled()
            || response
                .headers()
                .get(http::header::CONNECTION)
                .is_some_and(|v| mcpgate_h1::has_token(v.as_bytes(), "close"));
        let exchange = write::Exchange {
            version,
            head_only,
            close,
        };
        match self.write_response(exchange, response).await {
            Ok(true) if !close && !stop.is_cancelled() => Next::KeepAlive,
            Ok(_) => Next::Close,
            Err(e) => {
                debug!(peer = %self.info.peer, error = %e, "answer not written: connection closed");
                Next::Close
            }
        }
    }
}

/// A request read from the connection, and how its exchange must end.
pub(crate) struct Incoming {
    request: Request<ReqBody>,
    /// The client asked to close, or its body was left unread.
    close: bool,
    /// A `HEAD` request: the answer's head only.
    head_only: bool,
}
