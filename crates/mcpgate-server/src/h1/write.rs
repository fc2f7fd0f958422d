//! Writing an answer: a whole body in one write with its head, a stream frame by frame
//! (frames that are ready together go out together), while the client is watched.

use bytes::Bytes;
use futures::FutureExt;
use http::{Response, StatusCode, Version};
use http_body_util::BodyExt;
use mcpgate_h1::{BodyLength, CHUNK_END, LAST_CHUNK};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::debug;

use super::{Connection, READ_AHEAD};
use crate::body::{self, Body};

/// Body bytes copied behind the head into one write; larger bodies get their own.
const INLINE: usize = 16 * 1024;

/// What the request said about how its answer is written.
#[derive(Debug, Clone, Copy)]
pub(super) struct Exchange {
    pub(super) version: Version,
    /// A `HEAD` request: no body.
    pub(super) head_only: bool,
    /// The connection closes after this answer (`Connection: close` is sent).
    pub(super) close: bool,
}

impl<I> Connection<I>
where
    I: AsyncRead + AsyncWrite + Unpin + Send,
{
    /// Writes `response`. `Ok(true)`: written whole with its framing, so the connection
    /// can carry another request; `Ok(false)`: the connection must close (the client
    /// went away mid-stream, or the body ended off its declared length).
    pub(super) async fn write_response(
        &mut self,
        ex: Exchange,
        response: Response<Body>,
    ) -> std::io::Result<bool> {
        let (parts, mut body) = response.into_parts();
        let bodyless = parts.status.is_informational()
            || parts.status == StatusCode::NO_CONTENT
            || parts.status == StatusCode::NOT_MODIFIED;
        let whole = body::whole_bytes(&mut body);
        let framing = match &whole {
            _ if bodyless => BodyLength::None,
            Some(bytes) => BodyLength::Known(bytes.as_ref().map_or(0, Bytes::len) as u64),
            None => match http_body::Body::size_hint(&body).exact() {
                Some(n) => BodyLength::Known(n),
                None if ex.version == Version::HTTP_11 => BodyLength::Chunked,
                None => BodyLength::UntilClose,
            },
        };
        self.wbuf.clear();
        mcpgate_h1::encode_response_head(
            &mut self.wbuf,
            (ex.version, parts.status),
            &parts.headers,
            body.content_type().map(str::as_bytes),
            framing,
            ex.close,
        );
        if ex.head_only || bodyless {
            self.send_buffered().await?;
            return Ok(true);
        }
        if let Some(whole) = whole {
            match whole {
                Some(b) if b.len() > INLINE => {
                    self.io.write_all(&self.wbuf).await?;
                    self.wbuf.clear();
                    self.io.write_all(&b).await?;
                }
                Some(b) => self.wbuf.extend_from_slice(&b),
                None => {}
            }
            self.send_buffered().await?;
            return Ok(true);
        }
        self.stream(body, framing).await
    }

    /// Streams `body`'s frames with `framing` after the head already in the write
    /// buffer. Frames that are ready at once are written together; the buffer goes out
    /// whenever the body has nothing more ready.
    async fn stream(&mut self, mut body: Body, framing: BodyLength) -> std::io::Result<bool> {
        let mut written = 0u64;
        let mut watching = self.rbuf.len() < READ_AHEAD;
        loop {
            let next = match body.frame().now_or_never() {
                Some(next) => next,
                None => {
                    self.send_buffered().await?;
                    let waited = tokio::select! {
                        biased;
                        next = body.frame() => Some(next),
                        n = self.io.read_buf(&mut self.rbuf), if watching => match n {
                            Ok(0) | Err(_) => None,
                            Ok(_) => {
                                watching = self.rbuf.len() < READ_AHEAD;
                                continue;
                            }
                        },
                    };
                    let Some(next) = waited else {
                        debug!(peer = %self.info.peer, "client went away mid-stream; stream dropped");
                        return Ok(false);
                    };
                    next
                }
            };
            let Some(Ok(frame)) = next else { break };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            written += data.len() as u64;
            self.frame(&data, framing).await?;
        }
        let whole = match framing {
            BodyLength::Chunked => {
                self.wbuf.extend_from_slice(LAST_CHUNK);
                true
            }
            BodyLength::Known(n) => written == n,
            BodyLength::UntilClose | BodyLength::None => false,
        };
        self.send_buffered().await?;
        if !whole {
            debug!(peer = %self.info.peer, ?framing, written, "answer ended off its framing; connection closed");
        }
        Ok(whole)
    }

    /// Appends one data frame (large ones are written straight away).
    async fn frame(&mut self, data: &Bytes, framing: BodyLength) -> std::io::Result<()> {
        let chunked = framing == BodyLength::Chunked;
        if chunked {
            let (line, n) = mcpgate_h1::chunk_size_line(data.len());
            self.wbuf.extend_from_slice(&line[..n]);
        }
        if data.len() > INLINE {
            self.io.write_all(&self.wbuf).await?;
            self.wbuf.clear();
            self.io.write_all(data).await?;
        } else {
            self.wbuf.extend_from_slice(data);
        }
        if chunked {
            self.wbuf.extend_from_slice(CHUNK_END);
        }
        if self.wbuf.len() > INLINE {
            self.io.write_all(&self.wbuf).await?;
            self.wbuf.clear();
        }
        Ok(())
    }

    async fn send_buffered(&mut self) -> std::io::Result<()> {
        if !self.wbuf.is_empty() {
            self.io.write_all(&self.wbuf).await?;
            self.wbuf.clear();
        }
        self.io.flush().await
    }
}
