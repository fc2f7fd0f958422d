//! A request on a pooled stdio child (see `children.rs`): [`SessionTable::lease`] finds
//! or starts the principal's child, [`Lease::request`] sends one request on it, and the
//! [`LeasedExchange`] yields what the child relates to that request — its replies, and
//! what the pool's sink routes to it — until the response. Dropped before the response
//! (the client went away), it tells the child to cancel, then lets go.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use mcpgate_jsonrpc::{Id, Message, Method};
use mcpgate_upstream::{Replies, Start, UpstreamError, Verdict};
use tokio::sync::mpsc;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::children::{Child, HolderSink, PoolKey, end};
use crate::eras::{Era, Protocol};
use crate::error::SessionError;
use crate::pool::Leased;
use crate::spec::ServerSpec;
use crate::table::SessionTable;

/// Unrelated messages buffered for the request holding a lease.
const HOLDER_BACKLOG: usize = 256;

/// One request's use of a pooled child; given back when dropped.
pub struct Lease {
    child: Leased<PoolKey, Child>,
    home: Arc<crate::session::Home>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("upstream", &self.child.get().tag)
            .finish()
    }
}

impl SessionTable {
    /// A lease on the stdio child of `server` for `principal`: theirs, or a new one
    /// (asked with `server/discover` first when its era is not known yet) — waiting
    /// (bounded) while another request of theirs is starting it.
    pub async fn lease(
        &self,
        server: &ServerSpec,
        principal: Option<Arc<str>>,
    ) -> Result<Lease, SessionError> {
        let key = PoolKey {
            principal,
            server: Arc::from(server.name.as_str()),
        };
        let child = self
            .inner
            .children
            .lease(&key, || self.start_child(server))
            .await?;
        Ok(Lease {
            child,
            home: self.inner.home.clone(),
        })
    }

    /// Starts a pooled child of `server`; when the children limit is reached, an idle
    /// session's child makes room first.
    async fn start_child(&self, server: &ServerSpec) -> Result<Child, SessionError> {
        let first = self.spawn_child(server).await;
        if let Err(SessionError::Upstream(UpstreamError::Capacity(_))) = &first
            && let Some(victim) = self.eviction_victim(crate::table::Full::Children)
        {
            info!(session = %victim.tag(), server = %victim.server(), "children limit reached: evicting the longest-idle session for a 2026-07-28 request");
            victim.close(crate::kinds::CloseReason::Evicted).await;
            return self.spawn_child(server).await;
        }
        first
    }

    /// Spawns a child of `server` (its era checked when not known).
    async fn spawn_child(&self, server: &ServerSpec) -> Result<Child, SessionError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let inner = &self.inner;
        let rt = &inner.home.rt;
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
        let Some(target) = server.backend.target() else {
            return Err(SessionError::WrongEra);
        };
        let tag: Arc<str> = Arc::from(format!("pool-{}", N.fetch_add(1, Ordering::Relaxed)));
        let cancel = rt.root.child_token();
        let sink = Arc::new(HolderSink::default());
        let opening = mcpgate_upstream::Opening::new(&tag, cancel.clone(), sink.clone());
        let upstream = inner
            .connector
            .transports()
            .open(target, Start::Fresh, opening)
            .inspect_err(|e| rt.metrics.upstream_error(e.kind()))?;
        let child = Child {
            upstream,
            cancel,
            sink,
            tag: tag.clone(),
        };
        if known == Era::Unknown && server.backend.is_stdio() {
            self.probe_child(server, child).await
        } else {
            info!(server = %server.name, upstream = %tag, pid = child.upstream.pid(), "pooled upstream started");
            Ok(child)
        }
    }

    /// Asks a new child of an `auto` server which era it speaks; a session-era one is
    /// ended (and the era learned).
    async fn probe_child(&self, server: &ServerSpec, child: Child) -> Result<Child, SessionError> {
        let rt = &self.inner.home.rt;
        let limit = rt
            .cfg
            .request_timeout
            .min(std::time::Duration::from_secs(30));
        match ask_era(&child, limit).await {
            Ok(Verdict::Modern) => {
                self.learned(&server.name, Era::Modern);
                info!(server = %server.name, upstream = %child.tag, pid = child.upstream.pid(), "pooled upstream started");
                Ok(child)
            }
            Ok(Verdict::Session) => {
                self.learned(&server.name, Era::Session);
                rt.tracker.spawn(end(Arc::new(child), "session_era"));
                Err(SessionError::WrongEra)
            }
            Err(e) => {
                warn!(server = %server.name, upstream = %child.tag, error = %e, "a new stdio child did not answer server/discover");
                rt.tracker.spawn(end(Arc::new(child), "probe_failed"));
                Err(SessionError::Upstream(e))
            }
        }
    }
}

/// Asks a fresh child which era it speaks: `server/discover` as its first line.
async fn ask_era(c: &Child, limit: std::time::Duration) -> Result<Verdict, UpstreamError> {
    let probe = Message::parse(mcpgate_upstream::discover_request("mcpgate-probe"))?;
    let ask = async {
        let mut replies = c.upstream.request(probe).await?;
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
        let listen = msg.is(&Method::Listen);
        let child = self.child.get().clone();
        let (holder, unrelated) = child.sink.hold(HOLDER_BACKLOG);
        let timeout = self.home.rt.cfg.request_timeout;
        let sent = tokio::select! {
            biased;
            () = child.cancel.cancelled() => Err(SessionError::Closed),
            r = child.upstream.request(msg) => r.map_err(SessionError::from),
        };
        let replies = match sent {
            Ok(r) => r,
            Err(e) => {
                child.sink.release(holder);
                return Err(e);
            }
        };
        let upstream_id = replies.upstream_id().cloned();
        if listen && let Some(up) = &upstream_id {
            child.sink.listening(holder, up.clone());
        }
        let deadline = if listen {
            None
        } else {
            Some(Box::pin(tokio::time::sleep(timeout)))
        };
        Ok(LeasedExchange {
            holder,
            cancel: child.cancel.clone(),
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
        &self.child.get().tag
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
                    mcpgate_upstream::ProtocolError::NoResponse,
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
        let child = lease.child.get().clone();
        child.sink.release(self.holder);
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
        let tracker = lease.home.rt.tracker.clone();
        debug!(upstream = %child.tag, id = %id, "client left; cancelling upstream");
        tracker.spawn(async move {
            let _ = child.upstream.send(msg).await;
            drop(replies);
            drop(lease);
        });
    }
}
