//! Legacy HTTP+SSE upstream (protocol 2024-11-05): one long-lived `GET` stream per
//! session carries every server message; the client POSTs to the URL announced in the
//! stream's first `endpoint` event. Like stdio, this is one pipe per session, so request
//! ids are rewritten and replies routed by [`Mux`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use mcpgate_jsonrpc::Message;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use sse_stream::SseStream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::credential::Credential;
use crate::error::{Cause, ConfigError, Ending, Teardown, UpstreamError};
use crate::mux::Mux;
use crate::replies::Replies;
use crate::sink::{EventSink, Opening};
use crate::timeouts::Timeouts;

/// The POST endpoint, once announced (or why it never will be).
type Endpoint = Option<Result<reqwest::Url, UpstreamError>>;

/// A dedicated legacy SSE upstream session.
#[derive(Debug)]
pub struct LegacyUpstream {
    timeouts: Timeouts,
    client: reqwest::Client,
    headers: HeaderMap,
    label: Arc<str>,
    mux: Mux,
    endpoint: watch::Receiver<Endpoint>,
    cancel: CancellationToken,
    /// The principal's credential toward the server, when it is not a static header.
    credential: Option<Arc<dyn Credential>>,
}

impl std::fmt::Debug for Mux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mux")
    }
}

impl LegacyUpstream {
    pub(crate) fn open(
        timeouts: Timeouts,
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
        o: Opening,
        credential: Option<Arc<dyn Credential>>,
    ) -> Result<Self, UpstreamError> {
        let url = reqwest::Url::parse(url).map_err(|e| ConfigError::Url {
            url: url.to_owned(),
            source: Cause::new(e),
        })?;
        let mux = Mux::default();
        let (tx, rx) = watch::channel(None);
        let mut get_headers = headers.clone();
        get_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let get = Request {
            client: client.clone(),
            method: reqwest::Method::GET,
            url: url.clone(),
            headers: get_headers,
            body: Bytes::new(),
            credential: credential.clone(),
        };
        let task_cancel = o.cancel.child_token();
        let reader = read_stream(
            get,
            url,
            tx,
            mux.clone(),
            o.sink,
            o.label.clone(),
            timeouts.connect,
        );
        o.tasks.spawn(async move {
            tokio::select! {
                () = task_cancel.cancelled() => {}
                () = reader => {}
            }
        });
        Ok(LegacyUpstream {
            timeouts,
            client,
            headers,
            label: o.label,
            mux,
            endpoint: rx,
            cancel: o.cancel,
            credential,
        })
    }

    /// Waits (bounded) for the `endpoint` event.
    async fn endpoint(&self) -> Result<reqwest::Url, UpstreamError> {
        let mut rx = self.endpoint.clone();
        let wait = self.timeouts.connect + self.timeouts.request.min(Duration::from_secs(30));
        let got = tokio::time::timeout(wait, rx.wait_for(Option::is_some))
            .await
            .map_err(|_| UpstreamError::Timeout(wait))?
            .map_err(|_| UpstreamError::Closed)?;
        match &*got {
            Some(r) => r.clone(),
            None => Err(UpstreamError::Closed),
        }
    }

    async fn post(&self, msg: Message) -> Result<(), UpstreamError> {
        let ep = self.endpoint().await?;
        let mut headers = self.headers.clone();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let req = Request {
            client: self.client.clone(),
            method: reqwest::Method::POST,
            url: ep,
            headers,
            body: msg.into_raw(),
            credential: self.credential.clone(),
        };
        let resp = req.send(self.timeouts.request).await?;
        match resp.status().as_u16() {
            200..=299 => Ok(()),
            404 => Err(UpstreamError::SessionGone),
            s => Err(UpstreamError::Status(s)),
        }
    }

    pub(crate) async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        let (out, replies) = self.mux.register(&msg)?;
        self.post(out).await?;
        Ok(replies)
    }

    pub(crate) async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        match self.mux.outgoing(msg, &self.label)? {
            Some(m) => self.post(m).await,
            None => Ok(()),
        }
    }

    pub(crate) async fn close(&self) -> Teardown {
        // The legacy transport has no DELETE: closing the stream ends the session.
        self.cancel.cancel();
        self.mux.close(&UpstreamError::Closed);
        Teardown::Disconnected
    }
}

/// One request to a legacy server, with the session's credential: a `401` gets one
/// renewed credential and one more try.
struct Request {
    client: reqwest::Client,
    method: reqwest::Method,
    url: reqwest::Url,
    headers: HeaderMap,
    body: Bytes,
    credential: Option<Arc<dyn Credential>>,
}

impl Request {
    async fn send(&self, timeout: Duration) -> Result<reqwest::Response, UpstreamError> {
        let send = |auth, _| self.send_with(auth, timeout);
        let refused = |r: &reqwest::Response| r.status() == reqwest::StatusCode::UNAUTHORIZED;
        crate::credential::authorized(self.credential.as_ref(), send, refused).await
    }

    async fn send_with(
        &self,
        auth: Option<HeaderValue>,
        timeout: Duration,
    ) -> Result<reqwest::Response, UpstreamError> {
        let mut req = self
            .client
            .request(self.method.clone(), self.url.clone())
            .headers(self.headers.clone())
            .body(self.body.clone());
        if let Some(a) = auth {
            req = req.header(AUTHORIZATION, a);
        }
        tokio::time::timeout(timeout, req.send())
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))?
            .map_err(|e| UpstreamError::from_reqwest(e, timeout))
    }
}

async fn read_stream(
    req: Request,
    base: reqwest::Url,
    endpoint: watch::Sender<Endpoint>,
    mux: Mux,
    sink: Arc<dyn EventSink>,
    label: Arc<str>,
    connect: Duration,
) {
    let why = match req.send(connect).await {
        Err(e) => e,
        Ok(resp) if !resp.status().is_success() => {
            let configured = base.as_str().parse().unwrap_or_default();
            crate::endpoint::status_error(resp.status().as_u16(), resp.headers(), &configured)
        }
        Ok(resp) => {
            let mut events = SseStream::from_bytes_stream(resp.bytes_stream());
            loop {
                match events.next().await {
                    None => break UpstreamError::Ended(Ending::StreamClosed),
                    Some(Err(e)) => break UpstreamError::Io(Cause::new(e)),
                    Some(Ok(ev)) => {
                        let data = ev.data.unwrap_or_default();
                        match ev.event.as_deref() {
                            Some("endpoint") => match base.join(data.trim()) {
                                // The endpoint must be on the server's own origin: POSTs carry
                                // the configured upstream credentials, and an allowlisted
                                // server must not point them (or the gateway) elsewhere.
                                Ok(url) if url.origin() != base.origin() => {
                                    warn!(session = %label, endpoint = %url, "legacy SSE upstream announced an endpoint on another origin; refused");
                                }
                                Ok(url) => {
                                    debug!(session = %label, endpoint = %url, "legacy SSE upstream announced its endpoint");
                                    endpoint.send_replace(Some(Ok(url)));
                                }
                                Err(e) => {
                                    warn!(session = %label, error = %e, "legacy SSE upstream sent a bad endpoint; ignored")
                                }
                            },
                            None | Some("message") if !data.is_empty() => {
                                match Message::parse(Bytes::from(data)) {
                                    Ok(m) => mux.incoming(m, &*sink, &label),
                                    Err(e) => {
                                        warn!(session = %label, error = %e, "legacy SSE upstream sent a non-JSON-RPC event; dropped")
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    };
    debug!(session = %label, error = %why, "legacy SSE upstream stream ended");
    if endpoint.borrow().is_none() {
        endpoint.send_replace(Some(Err(why.clone())));
    }
    mux.close(&why);
    sink.closed(why);
}
