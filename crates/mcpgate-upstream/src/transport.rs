//! The wire to one HTTP upstream origin.
//!
//! The request path of every session goes through [`Transport::send`]: an `http::Request`
//! the session built once and fills per request, answered as an `http::Response` whose
//! body streams as it arrives. Two implementations:
//! - [`Origin`], the fast path for upstreams reached directly: HTTP/1.1 connections
//!   (TLS when `https`) kept in a lock-free queue of idle ones (`crossbeam` `ArrayQueue`;
//!   nothing is locked per request), each driven by the request using it (`wire.rs`: no
//!   connection task). A connection goes back to the queue when its response body has
//!   been read to the end; a request that meets a
//!   connection the upstream has just closed *before any of it was written* (hyper hands
//!   the request back) is sent again on a fresh one — so a server's idle keep-alive
//!   timeout never fails a call, and a request is never sent twice. Same-origin
//!   `307`/`308` redirects are followed here.
//! - reqwest, for upstreams reached through a proxy (`HTTPS_PROXY` and friends, or a
//!   configured one), which reqwest implements.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HOST, LOCATION};
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tracing::debug;

use crate::error::{Cause, ConfigError, Dial, Redirect, UpstreamError};
use crate::wire::{Conn, Driven, Idle, Io, ReqBody, hyper_error};

/// A response body from an upstream.
pub(crate) type UpBody = UnsyncBoxBody<Bytes, UpstreamError>;

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
            Transport::Direct(o) => o.send_following(req).await,
            Transport::Proxied(c) => proxied(c, req, url).await,
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
        b.map_err(|e| UpstreamError::from_reqwest(e, Duration::ZERO))
            .boxed_unsync()
    }))
}

/// The connections to one origin (scheme, host, port, TLS settings).
pub(crate) struct Origin {
    host: String,
    port: u16,
    authority: HeaderValue,
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
        Ok(Arc::new(Origin {
            host: bare,
            port,
            authority,
            tls,
            idle: Arc::new(Idle::new(IDLE_CAPACITY)),
            connect_timeout,
            keep_idle,
        }))
    }

    /// Sends `req`, following same-origin `307`/`308` redirects.
    async fn send_following(
        self: &Arc<Self>,
        req: Request<Bytes>,
    ) -> Result<Response<UpBody>, UpstreamError> {
        let (mut parts, body) = req.into_parts();
        parts
            .headers
            .entry(HOST)
            .or_insert_with(|| self.authority.clone());
        for _ in 0..=MAX_REDIRECTS {
            let resp = self.send(&parts, &body).await?;
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
            debug!(from = %parts.uri, to = %next, "following a same-origin redirect");
            parts.uri = next;
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

    /// Sends one request on a pooled or new connection, driving that connection until
    /// the answer's head is in.
    ///
    /// Sent again, on another connection, in two cases only: hyper hands the request back
    /// unwritten (the connection was found closed first), or a *reused* connection that
    /// had been idle for at least [`MIN_IDLE_FOR_RESEND`] was closed or reset by the server
    /// before any byte of an answer — the keep-alive race, where a server's idle timer
    /// closes a connection the moment a request reaches it, unread (the rule Chromium
    /// applies to reused connections). The second happens once.
    async fn send(
        &self,
        parts: &http::request::Parts,
        body: &Bytes,
    ) -> Result<Response<UpBody>, UpstreamError> {
        let mut unsent = 0;
        let mut resent = false;
        loop {
            let mut conn = self.checkout().await?;
            // Only a connection that sat idle long enough for a server's idle timer to
            // fire can meet the keep-alive race; on one used a moment ago, an early close
            // or reset is the server's own doing and is reported.
            let reused = conn.served > 0 && conn.since.elapsed() >= MIN_IDLE_FOR_RESEND;
            let req = Request::from_parts(parts.clone(), ReqBody::new(body.clone()));
            let mut answer = std::pin::pin!(conn.tx.try_send_request(req));
            let r = std::future::poll_fn(|cx| {
                conn.drive(cx);
                answer.as_mut().poll(cx)
            })
            .await;
            let mut e = match r {
                Ok(resp) => {
                    let idle = self.idle.clone();
                    return Ok(resp.map(|body| Driven::new(body, conn, idle).boxed_unsync()));
                }
                Err(e) => e,
            };
            let was_unsent = e.take_message().is_some();
            let e = e.into_error();
            if was_unsent && unsent < MAX_UNSENT_RETRIES {
                unsent += 1;
                debug!(error = %e, "the connection closed before the request was written; sending it on a fresh one");
                continue;
            }
            if reused && !resent && closed_before_answer(&e) {
                resent = true;
                debug!(error = %e, "a reused connection was closed under the request before any answer; sending it on a fresh one");
                continue;
            }
            return Err(hyper_error(e));
        }
    }

    /// An idle connection that is still usable, or a new one.
    async fn checkout(&self) -> Result<Conn, UpstreamError> {
        while let Some(mut c) = self.idle.pop() {
            if c.since.elapsed() >= self.keep_idle {
                continue;
            }
            // Reads what arrived while it was idle: a close is noticed here.
            let alive = std::future::poll_fn(|cx| std::task::Poll::Ready(c.drive(cx))).await;
            if alive && c.usable() {
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
        let (tx, wire) = http1::handshake(TokioIo::new(io))
            .await
            .map_err(hyper_error)?;
        Ok(Conn::new(tx, wire))
    }
}

/// Whether `e` is the server closing (or resetting) the connection before any answer.
fn closed_before_answer(e: &hyper::Error) -> bool {
    if e.is_incomplete_message() || e.is_closed() {
        return true;
    }
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            );
        }
        cur = c.source();
    }
    false
}
