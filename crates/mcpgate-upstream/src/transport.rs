//! The wire to one HTTP upstream origin.
//!
//! The request path of every session goes through [`Transport::send`]: an `http::Request`
//! the session built once and fills per request, answered as an `http::Response` whose
//! body streams as it arrives. Two implementations:
//! - [`Origin`], the fast path for upstreams reached directly: HTTP/1.1 connections
//!   (TLS when `https`) kept in a lock-free queue of idle ones (`crossbeam` `ArrayQueue`;
//!   nothing is locked per request), each driven by its own task. A connection goes back
//!   to the queue when its response body has been read to the end; a request that meets a
//!   connection the upstream has just closed *before any of it was written* (hyper hands
//!   the request back) is sent again on a fresh one — so a server's idle keep-alive
//!   timeout never fails a call, and a request is never sent twice. Same-origin
//!   `307`/`308` redirects are followed here.
//! - reqwest, for upstreams reached through a proxy (`HTTPS_PROXY` and friends, or a
//!   configured one), which reqwest implements.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use http::header::{HOST, LOCATION};
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_util::task::TaskTracker;
use tracing::debug;

use crate::error::{UpstreamError, chain};

/// A response body from an upstream.
pub(crate) type UpBody = UnsyncBoxBody<Bytes, UpstreamError>;

/// Most idle connections kept per origin.
const IDLE_CAPACITY: usize = 1024;
/// Most same-origin redirects followed for one request.
const MAX_REDIRECTS: usize = 5;
/// Sends of one request on connections that turned out closed before it was written.
const MAX_UNSENT_RETRIES: usize = 3;

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
        .map_err(|e| UpstreamError::Connect(chain(&e)))?;
    let resp = client
        .execute(req)
        .await
        .map_err(|e| UpstreamError::from_reqwest(&e, Duration::ZERO))?;
    let resp: Response<reqwest::Body> = resp.into();
    Ok(resp.map(|b| {
        b.map_err(|e| UpstreamError::from_reqwest(&e, Duration::ZERO))
            .boxed_unsync()
    }))
}

/// An idle connection.
struct Idle {
    tx: SendRequest<Full<Bytes>>,
    since: Instant,
}

/// The connections to one origin (scheme, host, port, TLS settings).
pub(crate) struct Origin {
    host: String,
    port: u16,
    authority: HeaderValue,
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    idle: ArrayQueue<Idle>,
    connect_timeout: Duration,
    keep_idle: Duration,
    /// Owns every connection task.
    tasks: TaskTracker,
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
        let bad = |why: &str| UpstreamError::Connect(format!("bad upstream url {url}: {why}"));
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
            idle: ArrayQueue::new(IDLE_CAPACITY),
            connect_timeout,
            keep_idle,
            tasks: TaskTracker::new(),
        }))
    }

    /// Sends `req`, following same-origin `307`/`308` redirects.
    async fn send_following(
        self: &Arc<Self>,
        req: Request<Bytes>,
    ) -> Result<Response<UpBody>, UpstreamError> {
        let (parts, body) = req.into_parts();
        let mut uri = parts.uri.clone();
        for _ in 0..=MAX_REDIRECTS {
            let mut r = Request::from_parts(parts.clone(), Full::new(body.clone()));
            *r.uri_mut() = uri.clone();
            let resp = self.send(r).await?;
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
            debug!(from = %uri, to = %next, "following a same-origin redirect");
            uri = next;
        }
        Err(UpstreamError::Redirect(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
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

    /// Sends one request on a pooled or new connection.
    async fn send(
        self: &Arc<Self>,
        mut req: Request<Full<Bytes>>,
    ) -> Result<Response<UpBody>, UpstreamError> {
        req.headers_mut()
            .entry(HOST)
            .or_insert_with(|| self.authority.clone());
        for attempt in 0..=MAX_UNSENT_RETRIES {
            let mut tx = self.checkout().await?;
            match tx.try_send_request(req).await {
                Ok(resp) => {
                    let back = Some((tx, self.clone()));
                    return Ok(resp.map(|body| Returning { body, back }.boxed_unsync()));
                }
                Err(mut e) => match e.take_message() {
                    Some(r) if attempt < MAX_UNSENT_RETRIES => {
                        debug!(error = %e.error(), "the connection closed before the request was written; sending it on a fresh one");
                        req = r;
                    }
                    _ => return Err(hyper_error(&e.into_error())),
                },
            }
        }
        Err(UpstreamError::Io("no usable connection".into()))
    }

    /// An idle connection that is still usable, or a new one.
    async fn checkout(&self) -> Result<SendRequest<Full<Bytes>>, UpstreamError> {
        while let Some(mut i) = self.idle.pop() {
            if i.tx.is_closed() || i.since.elapsed() >= self.keep_idle {
                continue;
            }
            // Its last response was read to the end; the connection task may still be
            // finishing it, which takes no time.
            match tokio::time::timeout(Duration::from_secs(1), i.tx.ready()).await {
                Ok(Ok(())) => return Ok(i.tx),
                _ => continue,
            }
        }
        self.connect().await
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, UpstreamError> {
        let limit = self.connect_timeout;
        let tcp = tokio::time::timeout(limit, TcpStream::connect((self.host.as_str(), self.port)))
            .await
            .map_err(|_| UpstreamError::Timeout(limit))?
            .map_err(|e| UpstreamError::Connect(format!("{}:{}: {e}", self.host, self.port)))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => self.handshake(tcp).await,
            Some((connector, name)) => {
                let tls = tokio::time::timeout(limit, connector.connect(name.clone(), tcp))
                    .await
                    .map_err(|_| UpstreamError::Timeout(limit))?
                    .map_err(|e| {
                        mcpgate_tls::describe(&e).map_or_else(
                            || UpstreamError::Connect(format!("TLS: {e}")),
                            UpstreamError::Tls,
                        )
                    })?;
                self.handshake(tls).await
            }
        }
    }

    async fn handshake<I>(&self, io: I) -> Result<SendRequest<Full<Bytes>>, UpstreamError>
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, conn) = http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| hyper_error(&e))?;
        self.tasks.spawn(async move {
            if let Err(e) = conn.await {
                debug!(error = %e, "upstream connection ended with an error");
            }
        });
        Ok(tx)
    }

    fn checkin(&self, tx: SendRequest<Full<Bytes>>) {
        if !tx.is_closed() {
            // A full queue drops the connection (it closes).
            let _ = self.idle.push(Idle {
                tx,
                since: Instant::now(),
            });
        }
    }
}

fn hyper_error(e: &hyper::Error) -> UpstreamError {
    if let Some(tls) = mcpgate_tls::describe(e) {
        return UpstreamError::Tls(tls);
    }
    UpstreamError::Io(chain(e))
}

/// A response body that gives its connection back once read to its end (a body dropped
/// before its end takes the connection with it: HTTP/1.1 cannot reuse it).
struct Returning {
    body: Incoming,
    back: Option<(SendRequest<Full<Bytes>>, Arc<Origin>)>,
}

impl Body for Returning {
    type Data = Bytes;
    type Error = UpstreamError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        let this = &mut *self;
        let r = std::pin::Pin::new(&mut this.body).poll_frame(cx);
        if let std::task::Poll::Ready(None) = &r
            && let Some((tx, origin)) = this.back.take()
        {
            origin.checkin(tx);
        }
        r.map(|f| f.map(|f| f.map_err(|e| hyper_error(&e))))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
