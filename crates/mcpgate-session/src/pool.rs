//! Upstreams leased to one request at a time, kept per (principal, server).
//!
//! MCP 2026-07-28 has no client session to own a stdio child, yet a child must never
//! serve two principals (one process holds one principal's state), and a stdio child has
//! one output pipe, so a log line it writes belongs to whatever request it is serving.
//! The unit is therefore a **lease**: a request takes an idle child of its own principal
//! and server — the same one again when it works one request at a time, so state kept in
//! the process carries over, as it would for a direct client — or starts a new one for a
//! concurrent request, up to `max_per_key`; beyond that it waits (bounded). Everything a
//! leased child writes that belongs to no request goes to the one request holding it.
//! Idle children are ended after the server's idle timeout through their teardown.

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

/// Where a leased upstream's unrelated messages go: to the request holding it.
#[derive(Debug, Default)]
pub(crate) struct HolderSink {
    /// Plain mutex: held only to swap or use the sender, never across an `.await`.
    holder: Mutex<Option<mpsc::Sender<Message>>>,
    /// Set when the upstream ended on its own.
    ended: AtomicBool,
}

impl EventSink for HolderSink {
    fn message(&self, msg: Message) {
        let sent = self
            .holder
            .lock()
            .ok()
            .and_then(|h| h.as_ref().map(|tx| tx.try_send(msg).is_ok()));
        if sent != Some(true) {
            debug!(
                "a pooled upstream wrote a message while no request held it (or its reader lagged); dropped"
            );
        }
    }

    fn closed(&self, why: UpstreamError) {
        debug!(reason = %why, "a pooled upstream ended");
        self.ended.store(true, Ordering::Release);
        if let Ok(mut h) = self.holder.lock() {
            *h = None;
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
    busy: AtomicBool,
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
            busy: AtomicBool::new(true),
            last_used_ms: AtomicU64::new(now_ms),
        })
    }

    fn is_dead(&self) -> bool {
        self.sink.ended.load(Ordering::Acquire) || self.cancel.is_cancelled()
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
    pub(crate) max_per_key: usize,
    pub(crate) wait: Duration,
}

/// What taking a lease found.
pub(crate) enum Take {
    /// An idle upstream of the key, now leased.
    Idle(Arc<Pooled>),
    /// None idle, room for one more: the caller starts it (and must call `started`).
    Start,
    /// None idle and no room.
    Full,
}

impl Pools {
    pub(crate) fn new(max_per_key: usize, wait: Duration) -> Self {
        Pools {
            entries: Mutex::default(),
            starting: Mutex::default(),
            released: Notify::new(),
            max_per_key: max_per_key.max(1),
            wait,
        }
    }

    pub(crate) fn take(&self, key: &PoolKey) -> Take {
        let Ok(mut map) = self.entries.lock() else {
            return Take::Full;
        };
        let list = map.entry(key.clone()).or_default();
        list.retain(|p| !p.is_dead());
        // The most recently used idle one first: a principal working one request at a
        // time gets the same process back.
        let idle = list
            .iter()
            .filter(|p| !p.busy.load(Ordering::Acquire))
            .max_by_key(|p| p.last_used_ms.load(Ordering::Relaxed))
            .cloned();
        if let Some(p) = idle {
            p.busy.store(true, Ordering::Release);
            return Take::Idle(p);
        }
        let live = list.len();
        drop(map);
        let Ok(mut starting) = self.starting.lock() else {
            return Take::Full;
        };
        let n = starting.entry(key.clone()).or_insert(0);
        if live + *n >= self.max_per_key {
            return Take::Full;
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
        if let Ok(mut h) = p.sink.holder.lock() {
            *h = None;
        }
        p.last_used_ms.store(now_ms, Ordering::Relaxed);
        p.busy.store(false, Ordering::Release);
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
                let stale = !p.busy.load(Ordering::Acquire)
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

    /// Pooled upstreams per key: (live, busy), for the admin API and tests.
    pub(crate) fn counts(&self) -> Vec<(PoolKey, usize, usize)> {
        self.entries
            .lock()
            .map(|m| {
                m.iter()
                    .map(|(k, l)| {
                        let busy = l.iter().filter(|p| p.busy.load(Ordering::Acquire)).count();
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

/// Makes the request holding a lease the receiver of the upstream's unrelated messages.
pub(crate) fn hold(p: &Pooled, capacity: usize) -> mpsc::Receiver<Message> {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    if let Ok(mut h) = p.sink.holder.lock() {
        *h = Some(tx);
    }
    rx
}
