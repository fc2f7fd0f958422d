//! The stdio children kept per (principal, server) for requests that have no session
//! (MCP 2026-07-28 toward stdio servers), in the table's keyed pool (`pool.rs`); a
//! request on one is `lease.rs`.
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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mcpgate_jsonrpc::Message;
use mcpgate_upstream::{EventSink, Upstream, UpstreamError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::pool::Poolable;

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

/// One pooled child.
#[derive(Debug)]
pub(crate) struct Child {
    pub(crate) upstream: Upstream,
    pub(crate) cancel: CancellationToken,
    pub(crate) sink: Arc<HolderSink>,
    pub(crate) tag: Arc<str>,
}

impl Poolable for Child {
    fn is_dead(&self) -> bool {
        self.sink.ended.load(Ordering::Acquire) || self.cancel.is_cancelled()
    }
}

/// Ends one pooled child through its bounded teardown.
pub(crate) async fn end(c: Arc<Child>, why: &'static str) {
    c.cancel.cancel();
    let outcome = c.upstream.close().await;
    info!(upstream = %c.tag, reason = why, outcome = %outcome, "pooled upstream ended");
}
