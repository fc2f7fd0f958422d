//! Leasing the era bridge's pooled sessions (see `bridge_pool.rs`): a pooled session to
//! one 2026-07-28 request at a time ([`BridgeLease`]), and a session opened for one
//! purpose (a listen stream).

use std::sync::{Arc, Mutex};

use mcpgate_bridge::ClientMeta;
use mcpgate_jsonrpc::Message;
use mcpgate_upstream::UpstreamError;
use tracing::{debug, info};

use crate::bridge_pool::{BridgeKey, BridgeSession};
use crate::error::SessionError;
use crate::kinds::{CloseReason, FrontKind};
use crate::pool::Leased;
use crate::session::Session;
use crate::spec::ServerSpec;
use crate::table::{Holder, SessionTable};

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
pub struct BridgeLease(Leased<BridgeKey, BridgeSession>);

impl std::fmt::Debug for BridgeLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeLease")
            .field("session", &self.session().tag())
            .finish()
    }
}

impl BridgeLease {
    /// The leased session.
    pub fn session(&self) -> &Arc<Session> {
        &self.0.get().session
    }

    /// The upstream's answer to the session's `initialize`.
    pub fn init(&self) -> &Message {
        &self.0.get().init
    }

    /// The upstream's `serverInfo`.
    pub fn server_info(&self) -> Option<&serde_json::Value> {
        self.0.get().server_info.as_ref()
    }

    /// Sets the session's log level to `level` with `logging/setLevel`, unless it is
    /// already that.
    pub async fn set_level(&self, level: &str) -> Result<(), SessionError> {
        let b = self.0.get();
        if b.level.lock().is_ok_and(|l| l.as_deref() == Some(level)) {
            return Ok(());
        }
        let msg = Message::parse(mcpgate_bridge::set_level("mcpgate-bridge-level", level))
            .map_err(UpstreamError::from)?;
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

impl SessionTable {
    /// A pooled session of `server` for `principal` declaring `meta`'s capabilities,
    /// leased to one request: an idle one (the one given back last), or a new one opened
    /// and initialized now.
    pub async fn bridge_lease(
        &self,
        server: &ServerSpec,
        principal: Option<Arc<str>>,
        meta: &ClientMeta,
    ) -> Result<BridgeLease, SessionError> {
        let key = BridgeKey {
            principal: principal.clone(),
            server: Arc::from(server.name.as_str()),
            capabilities: meta.capabilities.clone(),
        };
        let open = || self.open_for_bridge(server, principal, meta);
        let lease = BridgeLease(self.inner.bridges.lease(&key, open).await?);
        debug!(session = %lease.session().tag(), server = %server.name, "bridged session leased");
        Ok(lease)
    }

    /// A session of `server` for `principal` declaring `meta`'s capabilities, opened and
    /// initialized for one purpose and not pooled (a `subscriptions/listen` stream): the
    /// session and the upstream's `initialize` answer. The caller ends it.
    pub async fn bridge_session(
        &self,
        server: &ServerSpec,
        principal: Option<Arc<str>>,
        meta: &ClientMeta,
    ) -> Result<(Arc<Session>, Message), SessionError> {
        let b = self.open_for_bridge(server, principal, meta).await?;
        Ok((b.session, b.init))
    }

    async fn open_for_bridge(
        &self,
        server: &ServerSpec,
        principal: Option<Arc<str>>,
        meta: &ClientMeta,
    ) -> Result<BridgeSession, SessionError> {
        let session = self
            .create(server, FrontKind::Bridge, principal, Holder::Server)
            .await?;
        // Until it is initialized, a session whose opener goes away (its client gone) is
        // ended, not left to idle out.
        let mut unopened = CloseUnlessOpened(Some(session.clone()));
        let opened = initialize(&session, meta).await;
        unopened.0 = None;
        match opened {
            Ok(init) => {
                info!(session = %session.tag(), server = %server.name, "bridged session opened for a 2026-07-28 client");
                Ok(BridgeSession {
                    server_info: mcpgate_bridge::server_info(&init),
                    session,
                    init,
                    level: Mutex::new(None),
                })
            }
            Err(e) => {
                session.close(CloseReason::InitFailed).await;
                Err(session.init_failure(e))
            }
        }
    }
}

/// `initialize` (declaring `meta`'s capabilities) and `initialized` on a new session;
/// the upstream's answer.
async fn initialize(session: &Arc<Session>, meta: &ClientMeta) -> Result<Message, SessionError> {
    let parse = |b: bytes::Bytes| Message::parse(b).map_err(UpstreamError::from);
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
        return Err(SessionError::Refused(init));
    }
    session
        .notify(parse(mcpgate_bridge::initialized())?)
        .await?;
    Ok(init)
}
