//! A request on a pooled upstream (see `pool.rs`): [`SessionTable::lease`] finds or starts
//! the principal's upstream, [`Lease::request`] sends one request on it, and the
//! [`LeasedExchange`] yields what the upstream relates to that request — its replies, and
//! what the pool's sink routes to it — until the response. Dropped before the response
//! (the client went away), it tells the upstream to cancel, then lets go.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use mcpgate_jsonrpc::{Id, Message, mcp};
use mcpgate_upstream::{Replies, Target, UpstreamError, Verdict};
use tokio::sync::mpsc;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::pool::{self, HolderSink, PoolKey, Pooled, Take};
use crate::session::Session;
use crate::shared::Shared;

type Inner = Shared<Session>;
use crate::eras::{Era, Protocol};
use crate::error::SessionError;
use crate::spec::ServerSpec;
use crate::table::SessionTable;

/// Unrelated messages buffered for the request holding a lease.
const HOLDER_BACKLOG: usize = 256;

/// One request's use of a pooled upstream; given back when dropped.
pub struct Lease {
    pooled: Arc<Pooled>,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("upstream", &self.pooled.tag)
            .finish()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.inner
            .pools
            .give_back(&self.pooled, self.inner.now_ms());
    }
}

impl SessionTable {
    /// A lease on the upstream of `server` for `principal`: theirs, or a new one (a stdio
    /// child, asked with `server/discover` first when its era is not known yet) — waiting
    /// (bounded) while another request of theirs is starting it.
    pub async fn lease(
        &self,
        server: &ServerSpec,
        principal: Option<Arc<str>>,
    ) -> Result<Lease, SessionError> {
        let inner = &self.inner;
        let key = PoolKey {
            principal,
            server: Arc::from(server.name.as_str()),
        };
        let deadline = tokio::time::Instant::now() + inner.pools.wait;
        loop {
            match inner.pools.take(&key) {
                Take::Found(pooled) => {
                    return Ok(Lease {
                        pooled,
                        inner: inner.clone(),
                    });
                }
                Take::Start => {
                    let mut started = self.start_pooled(server).await;
                    // The children limit is reached: an idle session's child makes room.
                    if let Err(SessionError::Upstream(UpstreamError::Capacity(_))) = &started
                        && let Some(victim) = self.eviction_victim(crate::table::Full::Children)
                    {
                        info!(session = %victim.tag(), server = %victim.server(), "children limit reached: evicting the longest-idle session for a 2026-07-28 request");
                        victim.close(crate::kinds::CloseReason::Evicted).await;
                        started = self.start_pooled(server).await;
                    }
                    return match started {
                        Ok(p) => {
                            inner.pools.started(&key, Some(p.clone()));
                            Ok(Lease {
                                pooled: p,
                                inner: inner.clone(),
                            })
                        }
                        Err(e) => {
                            inner.pools.started(&key, None);
                            Err(e)
                        }
                    };
                }
                Take::Starting => {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    if left.is_zero() || !inner.pools.released(left).await {
                        return Err(SessionError::TooManyInflight);
                    }
                }
            }
        }
    }

    /// Starts a pooled upstream of `server` (its era checked when not known).
    async fn start_pooled(&self, server: &ServerSpec) -> Result<Arc<Pooled>, SessionError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let inner = &self.inner;
        let known = match server.protocol {
            Protocol::Modern => Era::Modern,
            Protocol::Session => Era::Session,
            Protocol::Auto => inner.eras.get(&server.name),
        };
        // A server known to speak only the session era gets no child here (another
        // request may have learned that while this one waited).
        if known == Era::Session {
            return Err(SessionError::WrongEra);
        }
        let tag: Arc<str> = Arc::from(format!("pool-{}", N.fetch_add(1, Ordering::Relaxed)));
        let cancel = inner.root.child_token();
        let sink = Arc::new(HolderSink::default());
        let upstream = inner
            .connector
            .open(&server.target, &tag, cancel.clone(), sink.clone())
            .inspect_err(|e| inner.metrics.upstream_error(e.kind()))?;
        let pooled = Pooled::new(upstream, cancel, sink, tag.clone(), inner.now_ms());
        if known == Era::Unknown && matches!(server.target, Target::Stdio { .. }) {
            match ask_era(
                &pooled,
                inner
                    .cfg
                    .request_timeout
                    .min(std::time::Duration::from_secs(30)),
            )
            .await
            {
                Ok(Verdict::Modern) => self.learned(&server.name, Era::Modern),
                Ok(Verdict::Session) => {
                    self.learned(&server.name, Era::Session);
                    inner.tracker.spawn(pool::end(pooled, "session_era"));
                    return Err(SessionError::WrongEra);
                }
                Err(e) => {
                    warn!(server = %server.name, upstream = %tag, error = %e, "a new stdio child did not answer server/discover");
                    inner.tracker.spawn(pool::end(pooled, "probe_failed"));
                    return Err(SessionError::Upstream(e));
                }
            }
        }
        info!(server = %server.name, upstream = %tag, pid = pooled.upstream.pid(), "pooled upstream started");
        Ok(pooled)
    }
}

/// Asks a fresh child which era it speaks: `server/discover` as its first line.
async fn ask_era(p: &Pooled, limit: std::time::Duration) -> Result<Verdict, UpstreamError> {
    let probe = Message::parse(mcpgate_upstream::discover_request("mcpgate-probe"))
        .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
    let ask = async {
        let mut replies = p.upstream.request(probe).await?;
        while let Some(item) = replies.next().await {
            let m = item?;
            if m.is_response() {
                return Ok(mcpgate_upstream::classify(&m));
            }
        }
        Ok(Verdict::Session)
    };
    match tokio::time::timeout(limit, ask).await {
        Ok(Ok(v)) => Ok(v),
        // A session-era server may simply exit on a request before `initialize`.
        Ok(Err(UpstreamError::Exited(_))) => Ok(Verdict::Session),
        Ok(Err(e)) => Err(e),
        // Slow is not an answer: no verdict (a busy machine starting many children).
        Err(_) => Err(UpstreamError::Timeout(limit)),
    }
}

impl Lease {
    /// Sends one request on the leased upstream.
    pub async fn request(self, msg: Message) -> Result<LeasedExchange, SessionError> {
        let client_id = msg.id().cloned();
        let listen = msg.method() == Some(mcp::LISTEN);
        let (holder, unrelated) = self.pooled.sink.hold(HOLDER_BACKLOG);
        let timeout = self.inner.cfg.request_timeout;
        let sent = tokio::select! {
            biased;
            () = self.pooled.cancel.cancelled() => Err(SessionError::Closed),
            r = self.pooled.upstream.request(msg) => r.map_err(SessionError::from),
        };
        let replies = match sent {
            Ok(r) => r,
            Err(e) => {
                self.pooled.sink.release(holder);
                return Err(e);
            }
        };
        let upstream_id = replies.upstream_id().cloned();
        if listen && let Some(up) = &upstream_id {
            self.pooled.sink.listening(holder, up.clone());
        }
        let deadline = if listen {
            None
        } else {
            Some(Box::pin(tokio::time::sleep(timeout)))
        };
        Ok(LeasedExchange {
            holder,
            cancel: self.pooled.cancel.clone(),
            lease: Some(self),
            replies: Some(replies),
            unrelated,
            client_id,
            upstream_id: upstream_id.filter(|_| listen),
            deadline,
            timeout,
            done: false,
        })
    }

    /// The tag of the leased upstream, for logs.
    pub fn upstream_tag(&self) -> &str {
        &self.pooled.tag
    }
}

/// A request in flight on a leased upstream.
#[derive(Debug)]
pub struct LeasedExchange {
    /// Its registration with the pool's sink.
    holder: u64,
    lease: Option<Lease>,
    replies: Option<Replies>,
    unrelated: mpsc::Receiver<Message>,
    cancel: CancellationToken,
    client_id: Option<Id>,
    /// For a listen request: the id the upstream tags its stream's messages with.
    upstream_id: Option<Id>,
    deadline: Option<Pin<Box<Sleep>>>,
    timeout: std::time::Duration,
    done: bool,
}

impl LeasedExchange {
    /// The next message for the client, ending with the response (or an error).
    pub async fn next(&mut self) -> Option<Result<Message, SessionError>> {
        if self.done {
            return None;
        }
        let replies = self.replies.as_mut()?;
        let deadline = async {
            match self.deadline.as_mut() {
                Some(d) => d.await,
                None => std::future::pending().await,
            }
        };
        let item = tokio::select! {
            biased;
            Some(m) = self.unrelated.recv() => Ok(m),
            r = replies.next() => match r {
                Some(Ok(m)) => Ok(m),
                Some(Err(e)) => Err(SessionError::Upstream(e)),
                None => Err(SessionError::Upstream(UpstreamError::Protocol(
                    "upstream ended the stream without a response".into(),
                ))),
            },
            () = deadline => Err(SessionError::Timeout(self.timeout)),
            () = self.cancel.cancelled() => Err(SessionError::Closed),
        };
        let item = item.map(|m| self.map_back(m));
        if item.as_ref().map_or(true, Message::is_response) {
            self.done = true;
        }
        Some(item)
    }

    /// A listen stream's messages carry the id the upstream knows; the client knows its
    /// own.
    fn map_back(&self, m: Message) -> Message {
        let (Some(up), Some(client)) = (&self.upstream_id, &self.client_id) else {
            return m;
        };
        if m.subscription_id().as_ref() == Some(up) {
            return m.with_subscription_id(client).unwrap_or(m);
        }
        m
    }
}

impl Drop for LeasedExchange {
    fn drop(&mut self) {
        let (Some(lease), Some(replies)) = (self.lease.take(), self.replies.take()) else {
            return;
        };
        lease.pooled.sink.release(self.holder);
        if self.done || self.cancel.is_cancelled() {
            return;
        }
        let Some(id) = self.client_id.clone() else {
            return;
        };
        // The client went away: cancel upstream (the request stays registered, so its id
        // maps, until the cancellation is out), then give the lease back.
        let Ok(msg) = Message::parse(mcpgate_jsonrpc::cancelled(&id, "client closed its stream"))
        else {
            return;
        };
        let tracker = lease.inner.tracker.clone();
        debug!(upstream = %lease.pooled.tag, id = %id, "client left; cancelling upstream");
        tracker.spawn(async move {
            let _ = lease.pooled.upstream.send(msg).await;
            drop(replies);
            drop(lease);
        });
    }
}
