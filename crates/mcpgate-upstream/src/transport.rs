//! The wire to one HTTP upstream origin.
//!
//! The request path of every session goes through [`Transport::send`]: an `http::Request`
//! the session built once and fills per request, answered as an `http::Response` whose
//! body streams as it arrives. Two implementations:
//! - [`Origin`], the fast path for upstreams reached directly: HTTP/1.1 connections
//!   (TLS when `https`) kept in a lock-free queue of idle ones (`crossbeam` `ArrayQueue`;
//!   nothing is locked per request), each read and written by the request using it
//!   (`wire.rs`, on `mcpgate-h1`: no connection task). A connection goes back to the
//!   queue when its response body has been read to the end — at once when the whole
//!   answer came with its head. A request that meets a connection the upstream has just
//!   closed is sent again on a fresh one (the rules at [`Origin::send`]) — so a server's
//!   idle keep-alive timeout never fails a call. Same-origin `307`/`308` redirects are
//!   followed here.
//! - reqwest, for upstreams reached through a proxy (`HTTPS_PROXY` and friends, or a
//!   configured one), which reqwest implements.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HOST, LOCATION};
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tracing::debug;

use crate::error::{Cause, ConfigError, Dial, Redirect, UpstreamError};
use crate::wire::{Conn, Failed, H1Body, Idle, Io, Outgoing};

/// A response body from an upstream: read from a pooled connection (held inline: no box
/// per answer), or reqwest's, through a proxy.
pub(crate) enum UpBody {
    Direct(H1Body),
    Proxied(UnsyncBoxBody<Bytes, UpstreamError>),
}

impl http_body::Body for UpBody {
    type Data = Bytes;
    type Error = UpstreamError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, UpstreamError>>> {
        match self.get_mut() {
            UpBody::Direct(b) => std::pin::Pin::new(b).poll_frame(cx),
            UpBody::Proxied(b) => std::pin::Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpBody::Direct(b) => b.is_end_stream(),
            UpBody::Proxied(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            UpBody::Direct(b) => b.size_hint(),
            UpBody::Proxied(b) => b.size_hint(),
        }
    }
}

/// Most idle connections kept per origin.
const IDLE_CAPACITY: usize = 1024;
/// Most same-origin redirects followed for one request.
const MAX_REDIRECTS: usize = 5;
/// Sends of one request on connections that turned out closed before it was written.
const MAX_UNSENT_RETRIES: usize = 3;
/// How long a connection must have been idle for a close under a request to count as the
/// keep-alive race (no server closes idle connections sooner; Node waits 5 s).
const MIN_IDLE_FOR_RESEND: Duration = Duration::from_millis(100);

/// How a server is reached.
#[derive(Clone, Debug)]
pub(crate) enum Transport {
    /// Directly: the pooled fast path.
    Direct(Arc<Origin>),
    /// Through a proxy: reqwest.
    Proxied(reqwest::Client),
}

impl Transport {
    /// Sends `req` (its URI origin-form for `Direct`, absolute for `Proxied`).
    pub(crate) async fn send(
        &self,
        req: Request<Bytes>,
        url: &Uri,
    ) -> Result<Response<UpBody>, UpstreamError> {
        match self {
            Transport::Direct(o) => {
                let (parts, body) = req.into_parts();
                let out = Outgoing {
                    method: &parts.method,
                    target: parts.uri.clone(),
                    pre: b"",
                    more: [None, None, None],
                    headers: Some(&parts.headers),
                    has_host: parts.headers.contains_key(HOST),
                    body: &body,
                };
                o.send_following(out).await
            }
            Transport::Proxied(c) => proxied(c, req, url).await,
        }
    }

    /// The pooled fast path, when the server is reached directly.
    pub(crate) fn direct(&self) -> Option<&Arc<Origin>> {
        match self {
            Transport::Direct(o) => Some(o),
            Transport::Proxied(_) => None,
        }
    }

    /// The request-target for `url`: origin-form for the direct path, absolute through a
    /// proxy.
    pub(crate) fn request_target(&self, url: &Uri) -> Uri {
        match self {
            Transport::Direct(_) => url.path_and_query().map_or_else(
                || Uri::from_static("/"),
                |pq| Uri::try_from(pq.as_str()).unwrap_or_else(|_| Uri::from_static("/")),
            ),
            Transport::Proxied(_) => url.clone(),
        }
    }
}

async fn proxied(
    client: &reqwest::Client,
    req: Request<Bytes>,
    url: &Uri,
) -> Result<Response<UpBody>, UpstreamError> {
    let (mut parts, body) = req.into_parts();
    parts.uri = url.clone();
    let req = reqwest::Request::try_from(Request::from_parts(parts, body))
        .map_err(|e| ConfigError::Request(Cause::new(e)))?;
    let resp = client
        .execute(req)
        .await
        .map_err(|e| UpstreamError::from_reqwest(e, Duration::ZERO))?;
    let resp: Response<reqwest::Body> = resp.into();
    Ok(resp.map(|b| {
        UpBody::Proxied(
            b.map_err(|e| UpstreamError::from_reqwest(e, Duration::ZERO))
                .boxed_unsync(),
        )
    }))
}

/// The connections to one origin (scheme, host, port, TLS settings).
pub(crate) struct Origin {
    host: String,
    port: u16,
    /// `host: AUTHORITY\r\n`, encoded once.
    host_field: Vec<u8>,
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    idle: Arc<Idle>,
    connect_timeout: Duration,
    keep_idle: Duration,
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("idle", &self.idle.len())
            .finish()
    }
}

impl Origin {
    /// The origin of `url`, with TLS `config` for `https`.
    pub(crate) fn new(
        url: &Uri,
        tls: Option<Arc<rustls::ClientConfig>>,
        connect_timeout: Duration,
        keep_idle: Duration,
    ) -> Result<Arc<Origin>, UpstreamError> {
        let bad = |why: &'static str| -> UpstreamError {
            ConfigError::Unusable {
                url: url.to_string(),
                why,
            }
            .into()
        };
        let https = match url.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let host = url.host().ok_or_else(|| bad("no host"))?;
        let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
        let authority = HeaderValue::from_str(url.authority().map_or(host, |a| a.as_str()))
            .map_err(|_| bad("bad authority"))?;
        let bare = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let tls = match (https, tls) {
            (true, Some(cfg)) => {
                let mut cfg = (*cfg).clone();
                cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
                let name = ServerName::try_from(bare.clone())
                    .map_err(|_| bad("not a valid TLS server name"))?;
                Some((tokio_rustls::TlsConnector::from(Arc::new(cfg)), name))
            }
            (true, None) => return Err(bad("https needs a TLS configuration")),
            (false, _) => None,
        };
        let mut host_field = Vec::new();
        mcpgate_h1::field(&mut host_field, b"host", authority.as_bytes());
        Ok(Arc::new(Origin {
            host: bare,
            port,
            host_field,
            tls,
            idle: Arc::new(Idle::new(IDLE_CAPACITY)),
            connect_timeout,
            keep_idle,
        }))
    }

    /// Sends `out`, following same-origin `307`/`308` redirects.
    pub(crate) async fn send_following(
        &self,
        mut out: Outgoing<'_>,
    ) -> Result<Response<UpBody>, UpstreamError> {
        for _ in 0..=MAX_REDIRECTS {
            let resp = self.send(&out).await?;
            let status = resp.status().as_u16();
            if !matches!(status, 307 | 308) {
                return Ok(resp);
            }
            // Same origin only: a relative Location, or an absolute one naming this
            // origin; anything else is the caller's to refuse (with the target named).
            let Some(next) = resp
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| self.same_origin_path(l))
            else {
                return Ok(resp);
            };
            debug!(from = %out.target, to = %next, "following a same-origin redirect");
            out.target = next;
        }
        Err(Redirect::TooMany(MAX_REDIRECTS).into())
    }

    /// The origin-form URI of `location` when it stays on this origin.
    fn same_origin_path(&self, location: &str) -> Option<Uri> {
        if location.starts_with('/') && !location.starts_with("//") {
            return Uri::try_from(location).ok();
        }
        let u: Uri = location.parse().ok()?;
        let https = u.scheme_str() == Some("https");
        let port = u.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = u.host()?.trim_start_matches('[').trim_end_matches(']');
        let same = host.eq_ignore_ascii_case(&self.host)
            && port == self.port
            && https == self.tls.is_some();
        same.then(|| {
            u.path_and_query()
                .and_then(|pq| Uri::try_from(pq.as_str()).ok())
        })
        .flatten()
    }

    /// Sends one request on a pooled or new connection and reads the answer's head.
    ///
    /// Sent again, on another connection, in two cases only: the write failed on a
    /// *reused* connection (it was closed while idle; up to [`MAX_UNSENT_RETRIES`] times),
    /// or a reused connection that had been idle for at least [`MIN_IDLE_FOR_RESEND`] was
    /// closed or reset by the server before any byte of an answer — the keep-alive race,
    /// where a server's idle timer closes a connection the moment a request reaches it,
    /// unread (the rule Chromium applies to reused connections). The second happens once.
    async fn send(&self, out: &Outgoing<'_>) -> Result<Response<UpBody>, UpstreamError> {
        let mut unsent = 0;
        let mut resent = false;
        loop {
            let mut conn = self.checkout().await?;
            let was_used = conn.served > 0;
            // Only a connection that sat idle long enough for a server's idle timer to
            // fire can meet the keep-alive race; on one used a moment ago, an early close
            // or reset is the server's own doing and is reported.
            let reused = was_used && conn.since.elapsed() >= MIN_IDLE_FOR_RESEND;
            let r = match conn.write_request(&self.host_field, out).await {
                Ok(()) => conn.read_head(out.method).await,
                Err(e) => Err(e),
            };
            let failed = match r {
                Ok(head) => return self.answer(conn, &head),
                Err(f) => f,
            };
            match failed {
                Failed::Write(e) if was_used && unsent < MAX_UNSENT_RETRIES => {
                    unsent += 1;
                    debug!(error = %e, "a reused connection was closed before the request was written; sending it on a fresh one");
                }
                Failed::ClosedBeforeAnswer(e) if reused && !resent => {
                    resent = true;
                    debug!(error = ?e, "a reused connection was closed under the request before any answer; sending it on a fresh one");
                }
                f => return Err(f.into_error()),
            }
        }
    }

    /// The answer whose head `conn` just read: a whole body already buffered gives the
    /// connection back at once; any other is read from it as it is polled.
    fn answer(
        &self,
        mut conn: Conn,
        head: &mcpgate_h1::ResponseHead,
    ) -> Result<Response<UpBody>, UpstreamError> {
        let headers = conn.take_head(head)?;
        let status = StatusCode::from_u16(head.status)
            .map_err(|_| UpstreamError::Io(Cause::new(mcpgate_h1::H1Error::Status(head.status))))?;
        let idle = (!head.close).then(|| self.idle.clone());
        let body = match conn.take_whole(head.body) {
            Some(whole) => {
                if let Some(idle) = idle {
                    idle.checkin(conn);
                }
                H1Body::whole(whole)
            }
            None => H1Body::streaming(conn, head.body, idle),
        };
        let mut resp = Response::new(UpBody::Direct(body));
        *resp.status_mut() = status;
        *resp.version_mut() = head.version;
        *resp.headers_mut() = headers;
        Ok(resp)
    }

    /// An idle connection that is still open, or a new one.
    async fn checkout(&self) -> Result<Conn, UpstreamError> {
        while let Some(mut c) = self.idle.pop() {
            if c.since.elapsed() >= self.keep_idle {
                continue;
            }
            // Reads what arrived while it was idle: a close is noticed here.
            let open = std::future::poll_fn(|cx| std::task::Poll::Ready(c.still_open(cx))).await;
            if open {
                return Ok(c);
            }
        }
        self.connect().await
    }

    async fn connect(&self) -> Result<Conn, UpstreamError> {
        let limit = self.connect_timeout;
        let tcp = tokio::time::timeout(limit, TcpStream::connect((self.host.as_str(), self.port)))
            .await
            .map_err(|_| UpstreamError::Timeout(limit))?
            .map_err(|source| {
                UpstreamError::Connect(Cause::new(Dial::Tcp {
                    host: self.host.clone(),
                    port: self.port,
                    source,
                }))
            })?;
        let _ = tcp.set_nodelay(true);
        let io = match &self.tls {
            None => Io::Plain(tcp),
            Some((connector, name)) => {
                let tls = tokio::time::timeout(limit, connector.connect(name.clone(), tcp))
                    .await
                    .map_err(|_| UpstreamError::Timeout(limit))?
                    .map_err(|e| match mcpgate_tls::describe(&e) {
                        Some(tls) => UpstreamError::Tls(tls),
                        None => UpstreamError::Connect(Cause::new(Dial::Tls(e))),
                    })?;
                Io::Tls(Box::new(tls))
            }
        };
        Ok(Conn::new(io))
    }
}
