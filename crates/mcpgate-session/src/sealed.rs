//! Sealed session ids (see `mcpgate-seal`): sealing a session once its upstream answered
//! `initialize`, and finding — or resuming — the session a sealed id names.
//!
//! A sealed id opens on any replica holding its key; one that names a session this replica
//! has no state for is **resumed**: a session is made under the same gateway id with an
//! upstream that already has its session (no `initialize` is sent). Whatever does not open
//! (tampered, truncated, an unknown or removed key), names another server or principal,
//! or has expired is not found, exactly like an unknown id, and logged.
//!
//! What bounds a sealed id: the upstream's own session (a DELETE through any replica ends
//! it there, and every replica then gets 404 from the upstream and ends its local state);
//! for an upstream that keeps no session, the id's lifetime (`sealed_stateless_lifetime`
//! from initialize, not renewed: a client cannot be given a new id mid-session), and a
//! DELETE makes the replica that served it refuse it from then on.

use std::sync::Arc;
use std::time::Duration;

use mcpgate_seal::{Claims, KeyRing, SealError};
use tracing::{info, warn};

use crate::error::SessionError;
use crate::kinds::FrontKind;
use crate::sealer::now_s;
use crate::session::Session;
use crate::spec::ServerSpec;
use crate::table::{How, SessionTable};

/// Longest client `initialize` capabilities kept in a sealed id (bigger ones are left out:
/// nothing on the request path needs them, and the id travels on every request).
const MAX_CAPABILITIES: usize = 1024;

impl SessionTable {
    /// Sets the keys sealed ids are made and opened with (`None`: sessions are not sealed;
    /// sealed ids then open nowhere here), and the lifetime of a stateless upstream's id.
    /// Takes effect for the next request; a removed key's ids are not found from then on.
    pub fn set_seal_keys(&self, ring: Option<KeyRing>, stateless_lifetime: Duration) {
        let s = &self.inner.home.rt.sealer;
        s.stateless_lifetime.store(
            stateless_lifetime.as_secs(),
            std::sync::atomic::Ordering::Relaxed,
        );
        s.ring.store(ring.map(Arc::new));
    }

    /// Seals `session` once its upstream accepted `initialize` (`capabilities`: the
    /// client's, as JSON): from then on the client knows it by the returned id. `None`
    /// when the session is not sealable (sealing off, not Streamable HTTP).
    pub fn seal(&self, session: &Session, capabilities: Option<&str>) -> Option<Arc<str>> {
        if !session.is_sealed() {
            return None;
        }
        let ring = self.inner.home.rt.sealer.ring.load_full()?;
        let up = session.upstream.http_session()?;
        let created = now_s();
        let expires = up.session_id.is_none().then(|| {
            created.saturating_add(
                self.inner
                    .home
                    .rt
                    .sealer
                    .stateless_lifetime
                    .load(std::sync::atomic::Ordering::Relaxed),
            )
        });
        let claims = Claims {
            sid: session.id.to_string(),
            server: session.server.to_string(),
            upstream_sid: up.session_id,
            version: up.version,
            capabilities: capabilities
                .filter(|c| c.len() <= MAX_CAPABILITIES)
                .map(str::to_owned),
            principal: session.principal.as_deref().map(str::to_owned),
            created,
            expires,
        };
        let token: Arc<str> = match ring.seal(&claims) {
            Ok(t) if t.len() > mcpgate_seal::MAX_TOKEN => {
                warn!(session = %session.tag(), len = t.len(), "the sealed id would be too long to open (a very long upstream session id or principal); the client gets this replica's id");
                return None;
            }
            Ok(t) => Arc::from(t),
            Err(e) => {
                warn!(session = %session.tag(), error = %e, "cannot seal the session id; the client gets this replica's id");
                return None;
            }
        };
        if let Some(x) = expires {
            let _ = session.sealed_until.set(x);
        }
        let _ = session.sealed_id.set(token.clone());
        Some(token)
    }

    /// Whether `id` names a session this replica has now (a sealed id is opened, not
    /// resumed): what a crowded gateway's reserve connections still serve.
    pub fn is_live_here(&self, id: &str) -> bool {
        match &*self.inner.home.rt.sealer.ring.load() {
            Some(r) if mcpgate_seal::looks_sealed(id) => r
                .open(id)
                .is_ok_and(|c| self.inner.home.sessions.contains(c.sid.as_str())),
            _ => self.inner.home.sessions.contains(id),
        }
    }

    /// The session a client's `Mcp-Session-Id` names on `server` for `principal`: a
    /// plain id is looked up; a sealed one is opened and checked, and resumed when this
    /// replica has no state for it. Anything else is [`SessionError::NotFound`].
    pub fn find(
        &self,
        id: &str,
        server: &ServerSpec,
        principal: Option<&Arc<str>>,
    ) -> Result<Arc<Session>, SessionError> {
        // A guard, not a clone: no shared reference count touched per request.
        let guard = self.inner.home.rt.sealer.ring.load();
        let ring = match &*guard {
            Some(r) if mcpgate_seal::looks_sealed(id) => r,
            _ => return self.get(id).ok_or(SessionError::NotFound),
        };
        let tag = mcpgate_seal::tag(id);
        let claims = ring.open(id).map_err(|e| {
            let why = match e {
                SealError::UnknownKey => "its key is not (or no longer) configured",
                _ => "it does not authenticate (tampered with, truncated or forged)",
            };
            warn!(session = %tag, server = %server.name, error = %e, "sealed session id refused as unknown: {why}");
            SessionError::NotFound
        })?;
        if claims.server != server.name || claims.principal.as_deref() != principal.map(|p| &**p) {
            warn!(session = %tag, server = %server.name, "sealed session id of another server or principal; refused as unknown");
            return Err(SessionError::NotFound);
        }
        if let Some(x) = claims.expires {
            let ended = self
                .inner
                .home
                .rt
                .sealer
                .ended
                .contains_key(claims.sid.as_str());
            if x <= now_s() || ended {
                info!(session = %tag, server = %server.name, ended, "sealed session id of a stateless upstream has expired or was deleted");
                return Err(SessionError::NotFound);
            }
        }
        // A local copy that is closing (idled out, evicted: the upstream session lives on)
        // is replaced by a fresh resume rather than refused.
        if let Some(s) = self.get(&claims.sid)
            && !s.is_closing()
        {
            return Ok(s);
        }
        let resume = mcpgate_upstream::Resume {
            session: Some(mcpgate_upstream::Resumed {
                session_id: claims.upstream_sid,
                version: claims.version,
            }),
        };
        let session = self.try_create(
            server,
            FrontKind::StreamableHttp,
            principal.cloned(),
            How::Resume(Arc::from(claims.sid), resume),
        )?;
        let _ = session.sealed_id.set(Arc::from(id));
        if let Some(x) = claims.expires {
            let _ = session.sealed_until.set(x);
        }
        Ok(session)
    }
}
