//! Upstream sessions the gateway holds for 2026-07-28 clients of session-era servers
//! (the era bridge): in a protocol without client sessions, the gateway is where sessions
//! live.
//!
//! A pooled session is an ordinary table session (front `bridge`: counted, reaped when
//! idle, evicted when the gateway is full, ended through [`Session::close`]) that no
//! client knows the id of. It is opened for one (principal, server, declared client
//! capabilities) — its `initialize` declares exactly those capabilities — and is
//! **leased to one request at a time**, so everything its upstream says while leased
//! belongs to that request. Leases are handed out last-returned-first: a principal making
//! one request at a time always gets the same session (the same stdio process) back; a
//! second one opens only for concurrent requests, up to `bridge_sessions` per key (beyond,
//! a request waits up to `lease_wait` for one to come back). The sessions are items of the
//! table's keyed pool (`pool.rs`).

use std::sync::{Arc, Mutex};

use mcpgate_jsonrpc::Message;

use crate::pool::Poolable;
use crate::session::Session;

/// Whose a pooled session is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct BridgeKey {
    pub(crate) principal: Option<Arc<str>>,
    pub(crate) server: Arc<str>,
    /// The client capabilities its `initialize` declared (canonical JSON).
    pub(crate) capabilities: String,
}

/// One pooled upstream session and what its `initialize` taught.
#[derive(Debug)]
pub(crate) struct BridgeSession {
    pub(crate) session: Arc<Session>,
    /// The upstream's answer to `initialize`.
    pub(crate) init: Message,
    pub(crate) server_info: Option<serde_json::Value>,
    /// The log level last set with `logging/setLevel` (plain mutex, never held across an
    /// `.await`).
    pub(crate) level: Mutex<Option<String>>,
}

impl Poolable for BridgeSession {
    fn is_dead(&self) -> bool {
        self.session.is_closing()
    }
}
