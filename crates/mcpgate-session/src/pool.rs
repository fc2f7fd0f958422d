//! Upstreams kept per (principal, server) for requests that have no session (MCP
//! 2026-07-28 toward stdio servers).
//!
//! There is no client session to own a stdio child, yet a child must never serve two
//! principals: one process holds one principal's state. The unit is **one child per
//! principal and server**, which every request of that principal uses, concurrently —
//! what a direct stdio client has: one process, its requests interleaved on the pipe (ids
//! rewritten by the upstream's mux). A listen stream and a call that changes the tool
//! list therefore meet in the same process, and sequential calls see the process's state.
//! What the child writes is routed to the request it belongs to: a response and progress
//! by id and token (the mux), a listen stream's messages by their `subscriptionId`,
//! anything else (a log line) to the oldest request in flight that is not a listen stream
//! — a stdio child does not say which request a log line is about, so between one
//! principal's own concurrent calls it may land on the wrong one; never on another
//! principal's. A child with nothing in flight for the server's idle timeout is ended
//! through its teardown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpgate_jsonrpc::Message;
use mcpgate_upstream::{EventSink, Upstream, UpstreamError};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

/// Whose a pooled upstream is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    /// The principal (`None` without authentication: one anonymous pool).
    pub(crate) principal: Option<Arc<str>>,
    /// The configured server.
    pub(crate) server: Arc<str>,
}

/// One request using a pooled upstream, as the sink sees it.
#[derive(Debug)]
struct Holder {
    key: u64,
    tx: mpsc::Sender<Message>,
    /// For a listen stream: the id the upstream tags its messages with.
    listen: Option<mcpgate_jsonrpc::Id>,
}

/// Where a pooled upstream's messages that belong to no request's replies go: to the
/// request in flight they belong to (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct HolderSink {
    /// Plain mutex: held only to route or update, never across an `.await`.
    holders: Mutex<Vec<Holder>>,
    next: AtomicU64,
    /// Set when the upstream ended on its own.
    ended: AtomicBool,
}

impl EventSink for HolderSink {
    fn message(&self, msg: Message) {
        let tag = msg.subscription_id();
        let sent = self.holders.lock().ok().and_then(|h| {
            let to = match &tag {
                Some(id) => h.iter().find(|x| x.listen.as_ref() == Some(id)),
                None => h.iter().find(|x| x.listen.is_none()),
            }?;
            Some(to.tx.try_send(msg).is_ok())
        });
        if sent != Some(true) {
            debug!("a pooled upstream wrote a message no request in flight takes; dropped");
        }
    }

    fn closed(&self, why: UpstreamError) {
        debug!(reason = %why, "a pooled upstream ended");
        self.ended.store(true, Ordering::Release);
        if let Ok(mut h) = self.holders.lock() {
            h.clear();
        }
    }
}

impl HolderSink {
    /// Registers a request in flight; its messages arrive on the returned receiver.
    pub(crate) fn hold(&self, capacity: usize) -> (u64, mpsc::Receiver<Message>) {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(capacity.max(1));
        if let Ok(mut h) = self.holders.lock() {
            h.push(Holder {
                key,
                tx,
                listen: None,
            });
        }
        (key, rx)
    }

    /// Marks a request as a listen stream tagged `upstream_id`.
    pub(crate) fn listening(&self, key: u64, upstream_id: mcpgate_jsonrpc::Id) {
        if let Ok(mut h) = self.holders.lock()
            && let Some(x) = h.iter_mut().find(|x| x.key == key)
        {
            x.listen = Some(upstream_id);
        }
    }

    pub(crate) fn release(&self, key: u64) {
        if let Ok(mut h) = self.holders.lock() {
            h.retain(|x| x.key != key);
        }
    }
}

/// One pooled upstream.
#[derive(Debug)]
pub(crate) struct Pooled {
    pub(crate) upstream: Upstream,
    pub(crate) cancel: CancellationToken,
    pub(crate) sink: Arc<HolderSink>,
    pub(crate) tag: Arc<str>,
    /// Requests in flight on it.
    inflight: AtomicU64,
    last_used_ms: AtomicU64,
}

impl Pooled {
    pub(crate) fn new(
        upstream: Upstream,
        cancel: CancellationToken,
        sink: Arc<HolderSink>,
        tag: Arc<str>,
        now_ms: u64,
    ) -> Arc<Self> {
        Arc::new(Pooled {
            upstream,
            cancel,
            sink,
            tag,
            inflight: AtomicU64::new(1),
            last_used_ms: AtomicU64::new(now_ms),
        })
    }

    fn is_dead(&self) -> bool {
        self.sink.ended.load(Ordering::Acquire) || self.cancel.is_cancelled()
    }

    fn is_busy(&self) -> bool {
        self.inflight.load(Ordering::Acquire) > 0
    }
}

/// The pools of one gateway.
#[derive(Debug)]
pub(crate) struct Pools {
    /// Plain mutex: map updates only, never held across an `.await`.
    entries: Mutex<HashMap<PoolKey, Vec<Arc<Pooled>>>>,
    /// Children being started, per key (counted against `max_per_key`).
    starting: Mutex<HashMap<PoolKey, usize>>,
    released: Notify,
    /// How long a request waits for the key's child to be started by another request.
    pub(crate) wait: Duration,
}

/// What taking a lease found.
pub(crate) enum Take {
    /// The key's upstream (now counting one more request in flight).
    Found(Arc<Pooled>),
    /// None: the caller starts it (and must call `started`).
    Start,
    /// Another request is starting it: wait for `released`.
    Starting,
}

impl Pools {
    pub(crate) fn new(wait: Duration) -> Self {
        Pools {
            entries: Mutex::default(),
            starting: Mutex::default(),
            released: Notify::new(),
            wait,
        }
    }

    pub(crate) fn take(&self, key: &PoolKey) -> Take {
        let Ok(mut map) = self.entries.lock() else {
            return Take::Starting;
        };
        let list = map.entry(key.clone()).or_default();
        list.retain(|p| !p.is_dead());
        if let Some(p) = list.first() {
            p.inflight.fetch_add(1, Ordering::AcqRel);
            return Take::Found(p.clone());
        }
        let live = list.len();
        drop(map);
        let Ok(mut starting) = self.starting.lock() else {
            return Take::Starting;
        };
        let n = starting.entry(key.clone()).or_insert(0);
        if live + *n >= 1 {
            return Take::Starting;
        }
        *n += 1;
        Take::Start
    }

    /// A start that `take` allowed has finished (`Some`: the new upstream, leased).
    pub(crate) fn started(&self, key: &PoolKey, pooled: Option<Arc<Pooled>>) {
        if let Ok(mut s) = self.starting.lock()
            && let Some(n) = s.get_mut(key)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                s.remove(key);
            }
        }
        if let Some(p) = pooled
            && let Ok(mut map) = self.entries.lock()
        {
            map.entry(key.clone()).or_default().push(p);
        }
        self.released.notify_waiters();
    }

    /// Waits (up to `limit`) for some lease to be given back.
    pub(crate) async fn released(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.released.notified())
            .await
            .is_ok()
    }

    pub(crate) fn give_back(&self, p: &Pooled, now_ms: u64) {
        p.last_used_ms.store(now_ms, Ordering::Relaxed);
        p.inflight.fetch_sub(1, Ordering::AcqRel);
        self.released.notify_waiters();
    }

    /// Takes out the idle upstreams unused for `idle_ms` (the reaper ends them), and
    /// the dead ones.
    pub(crate) fn expired(&self, now_ms: u64, idle_ms: impl Fn(&str) -> u64) -> Vec<Arc<Pooled>> {
        let Ok(mut map) = self.entries.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (key, list) in map.iter_mut() {
            let limit = idle_ms(&key.server);
            list.retain(|p| {
                let stale = !p.is_busy()
                    && now_ms.saturating_sub(p.last_used_ms.load(Ordering::Relaxed)) >= limit;
                if stale || p.is_dead() {
                    out.push(p.clone());
                    false
                } else {
                    true
                }
            });
        }
        map.retain(|_, l| !l.is_empty());
        out
    }

    /// Every pooled upstream (shutdown ends them all).
    pub(crate) fn drain(&self) -> Vec<Arc<Pooled>> {
        self.entries
            .lock()
            .map(|mut m| m.drain().flat_map(|(_, l)| l).collect())
            .unwrap_or_default()
    }

    /// Takes every upstream of `server` out of the pools (the server was removed or changed).
    pub(crate) fn drain_server(&self, server: &str) -> Vec<Arc<Pooled>> {
        self.entries
            .lock()
            .map(|mut m| {
                let keys: Vec<PoolKey> =
                    m.keys().filter(|k| &*k.server == server).cloned().collect();
                keys.into_iter()
                    .filter_map(|k| m.remove(&k))
                    .flatten()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Pooled upstreams per key: (live, busy), for the admin API and tests.
    pub(crate) fn counts(&self) -> Vec<(PoolKey, usize, usize)> {
        self.entries
            .lock()
            .map(|m| {
                m.iter()
                    .map(|(k, l)| {
                        let busy = l.iter().filter(|p| p.is_busy()).count();
                        (k.clone(), l.len(), busy)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Ends one pooled upstream through its bounded teardown.
pub(crate) async fn end(p: Arc<Pooled>, why: &'static str) {
    p.cancel.cancel();
    let outcome = p.upstream.close().await;
    info!(upstream = %p.tag, reason = why, outcome = %outcome, "pooled upstream ended");
}
