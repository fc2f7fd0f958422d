//! Upstream sessions the gateway holds for 2026-07-28 clients of session-era servers
//! (the era bridge): in a protocol without client sessions, the gateway is where sessions
//! live.
//!
//! A pooled session is an ordinary table session (front `bridged`: counted, reaped when
//! idle, evicted when the gateway is full, ended through [`Session::close`]) that no
//! client knows the id of. It is opened for one (principal, server, declared client
//! capabilities) — its `initialize` declares exactly those capabilities — and is
//! **leased to one request at a time**, so everything its upstream says while leased
//! belongs to that request. Leases are handed out last-returned-first: a principal making
//! one request at a time always gets the same session (the same stdio process) back; a
//! second one opens only for concurrent requests, up to `bridge_sessions` per key (beyond,
//! a request waits up to `lease_wait` for one to come back).

use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use mcpgate_bridge::ClientMeta;
use mcpgate_jsonrpc::Message;
use mcpgate_upstream::UpstreamError;
use tracing::{debug, info};

use crate::error::SessionError;
use crate::kinds::{CloseReason, FrontKind};
use crate::session::Session;
use crate::spec::ServerSpec;
use crate::table::SessionTable;

/// Whose a pooled session is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct BridgeKey {
    principal: Option<Arc<str>>,
    server: Arc<str>,
    /// The client capabilities its `initialize` declared (canonical JSON).
    capabilities: String,
}

/// One pooled upstream session and what its `initialize` taught.
#[derive(Debug)]
pub(crate) struct Bridged {
    session: Arc<Session>,
    /// The upstream's answer to `initialize`.
    init: Message,
    server_info: Option<serde_json::Value>,
    /// The log level last set with `logging/setLevel` (plain mutex, never held across an
    /// `.await`).
    level: Mutex<Option<String>>,
}

#[derive(Debug, Default)]
struct Slot {
    idle: Vec<Arc<Bridged>>,
    /// Pooled sessions of the key, idle or leased.
    live: usize,
}

/// The era bridge's pool of upstream sessions (owned by the front; its sessions live in
/// the table like any other).
#[derive(Debug)]
pub struct BridgePool {
    table: SessionTable,
    map: DashMap<BridgeKey, Slot>,
    /// Leases handed out; every 64th also forgets ended sessions of every key.
    leases: std::sync::atomic::AtomicU64,
    /// Woken when a session goes back (a request waiting for a full key retries).
    freed: tokio::sync::Notify,
}

impl BridgePool {
    /// An empty pool whose sessions `table` holds.
    pub fn new(table: SessionTable) -> Arc<Self> {
        Arc::new(BridgePool {
            table,
            map: DashMap::new(),
            leases: std::sync::atomic::AtomicU64::new(0),
            freed: tokio::sync::Notify::new(),
        })
    }

    /// An idle session of `key`, or the right to open one (`Ok(None)`), or `Err` when the
    /// key has `max` sessions and all are leased.
    fn take(&self, key: &BridgeKey, max: usize) -> Result<Option<Arc<Bridged>>, SessionError> {
        let mut slot = self.map.entry(key.clone()).or_default();
        let before = slot.idle.len();
        slot.idle.retain(|b| !b.session.is_closing());
        slot.live -= before - slot.idle.len();
        if let Some(b) = slot.idle.pop() {
            return Ok(Some(b));
        }
        if slot.live >= max {
            return Err(SessionError::TooManyInflight);
        }
        slot.live += 1;
        Ok(None)
    }

    /// `b` (or, with `None`, a session that could not be opened) is given back.
    fn give_back(&self, key: &BridgeKey, b: Option<Arc<Bridged>>) {
        let remove = match self.map.get_mut(key) {
            Some(mut slot) => {
                match b {
                    Some(b) if !b.session.is_closing() => slot.idle.push(b),
                    _ => slot.live = slot.live.saturating_sub(1),
                }
                slot.live == 0
            }
            None => false,
        };
        if remove {
            self.map.remove_if(key, |_, s| s.live == 0);
        }
        self.freed.notify_waiters();
    }

    /// Forgets pooled sessions that ended (idle expiry, eviction, upstream death).
    fn prune(&self) {
        for mut slot in self.map.iter_mut() {
            let before = slot.idle.len();
            slot.idle.retain(|b| !b.session.is_closing());
            let gone = before - slot.idle.len();
            slot.live -= gone;
        }
        self.map.retain(|_, s| s.live > 0);
    }

    /// Pooled sessions (idle or leased).
    pub fn live(&self) -> usize {
        self.map.iter().map(|s| s.live).sum()
    }
}

/// Ends a session that was being opened when its opener was dropped.
struct CloseUnlessOpened(Option<Arc<Session>>);

impl Drop for CloseUnlessOpened {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            drop(s.close(CloseReason::InitFailed));
        }
    }
}

/// A pooled session leased to one request; given back when dropped.
#[derive(Debug)]
pub struct BridgeLease {
    item: Option<Arc<Bridged>>,
    key: BridgeKey,
    pool: Arc<BridgePool>,
}

impl BridgeLease {
    fn bridged(&self) -> &Bridged {
        // Set from creation until drop.
        self.item
            .as_deref()
            .unwrap_or_else(|| unreachable!("a lease holds its session"))
    }

    /// The leased session.
    pub fn session(&self) -> &Arc<Session> {
        &self.bridged().session
    }

    /// The upstream's answer to the session's `initialize`.
    pub fn init(&self) -> &Message {
        &self.bridged().init
    }

    /// The upstream's `serverInfo`.
    pub fn server_info(&self) -> Option<&serde_json::Value> {
        self.bridged().server_info.as_ref()
    }

    /// Sets the session's log level to `level` with `logging/setLevel`, unless it is
    /// already that.
    pub async fn set_level(&self, level: &str) -> Result<(), SessionError> {
        let b = self.bridged();
        if b.level.lock().is_ok_and(|l| l.as_deref() == Some(level)) {
            return Ok(());
        }
        let msg = Message::parse(mcpgate_bridge::set_level("mcpgate-bridge-level", level))
            .map_err(|e| SessionError::Upstream(UpstreamError::Protocol(e.to_string())))?;
        let mut ex = b.session.request_exclusive(msg).await?;
        while let Some(m) = ex.next().await {
            if m?.is_response() {
                break;
            }
        }
        if let Ok(mut l) = b.level.lock() {
            *l = Some(level.to_owned());
        }
        Ok(())
    }
}

impl Drop for BridgeLease {
    fn drop(&mut self) {
        self.pool.give_back(&self.key, self.item.take());
    }
}

impl BridgePool {
    /// A pooled session of `server` for `principal` declaring `meta`'s capabilities,
    /// leased to one request: an idle one (the one given back last), or a new one opened
    /// and initialized now.
    pub async fn lease(
        self: &Arc<Self>,
        server: &ServerSpec,
        principal: Option<Arc<str>>,
        meta: &ClientMeta,
    ) -> Result<BridgeLease, SessionError> {
        if self
            .leases
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            % 64
            == 63
        {
            self.prune();
        }
        let key = BridgeKey {
            principal: principal.clone(),
            server: Arc::from(server.name.as_str()),
            capabilities: meta.capabilities.clone(),
        };
        // A key with all its sessions leased waits (bounded) for one to come back.
        let cfg = &self.table.inner.cfg;
        let deadline = tokio::time::Instant::now() + cfg.lease_wait;
        let taken = loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.take(&key, cfg.bridge_sessions) {
                Err(SessionError::TooManyInflight) => {
                    if tokio::time::timeout_at(deadline, freed).await.is_err() {
                        return Err(SessionError::TooManyInflight);
                    }
                }
                other => break other?,
            }
        };
        // From here the slot is the lease's: given back when it drops, whatever happens.
        let mut lease = BridgeLease {
            item: None,
            key,
            pool: self.clone(),
        };
        match taken {
            Some(b) => lease.item = Some(b),
            None => match self.open_bridged(server, principal, meta).await {
                Ok(b) => lease.item = Some(Arc::new(b)),
                // The slot taken for it goes back with the lease (item `None`).
                Err(e) => return Err(e),
            },
        }
        debug!(session = %lease.session().tag(), server = %server.name, "bridged session leased");
        Ok(lease)
    }

    /// A session of `server` for `principal` declaring `meta`'s capabilities, opened and
    /// initialized for one purpose and not pooled (a `subscriptions/listen` stream): the
    /// session and the upstream's `initialize` answer. The caller ends it.
    pub async fn dedicated(
        &self,
        server: &ServerSpec,
        principal: Option<Arc<str>>,
        meta: &ClientMeta,
    ) -> Result<(Arc<Session>, Message), SessionError> {
        let b = self.open_bridged(server, principal, meta).await?;
        Ok((b.session, b.init))
    }

    async fn open_bridged(
        &self,
        server: &ServerSpec,
        principal: Option<Arc<str>>,
        meta: &ClientMeta,
    ) -> Result<Bridged, SessionError> {
        let session = self
            .table
            .create(server, FrontKind::Bridged, principal)
            .await?;
        // Until it is initialized, a session whose opener goes away (its client gone) is
        // ended, not left to idle out.
        let mut unopened = CloseUnlessOpened(Some(session.clone()));
        let parse = |b: bytes::Bytes| {
            Message::parse(b)
                .map_err(|e| SessionError::Upstream(UpstreamError::Protocol(e.to_string())))
        };
        let opened = async {
            let mut ex = session
                .request(parse(mcpgate_bridge::initialize(
                    "mcpgate-bridge-init",
                    meta,
                ))?)
                .await?;
            let mut init = None;
            while let Some(m) = ex.next().await {
                let m = m?;
                if m.is_response() {
                    init = Some(m);
                    break;
                }
            }
            let init = init.ok_or(SessionError::Closed)?;
            if init.result_str("protocolVersion").is_none() {
                let why = String::from_utf8_lossy(init.raw()).into_owned();
                return Err(SessionError::Upstream(UpstreamError::Protocol(format!(
                    "the upstream refused initialize: {why}"
                ))));
            }
            session
                .notify(parse(mcpgate_bridge::initialized())?)
                .await?;
            Ok(init)
        }
        .await;
        match opened {
            Ok(init) => {
                unopened.0 = None;
                info!(session = %session.tag(), server = %server.name, "bridged session opened for a 2026-07-28 client");
                Ok(Bridged {
                    server_info: mcpgate_bridge::server_info(&init),
                    session,
                    init,
                    level: Mutex::new(None),
                })
            }
            Err(e) => {
                unopened.0 = None;
                session.close(CloseReason::InitFailed).await;
                Err(match e {
                    SessionError::NotFound | SessionError::Closed => {
                        SessionError::Upstream(session.upstream_cause().cloned().unwrap_or_else(
                            || UpstreamError::Ended("it ended before answering initialize".into()),
                        ))
                    }
                    e => e,
                })
            }
        }
    }
}
