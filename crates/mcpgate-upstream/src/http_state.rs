//! What a Streamable HTTP upstream told the gateway about its session — its
//! `Mcp-Session-Id` and the negotiated version, each set once — shared by the session's
//! requests (`http.rs`) and its SSE streams (`http_stream.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use http::{HeaderMap, HeaderName, HeaderValue};
use mcpgate_jsonrpc::mcp;

use crate::credential::Credential;

pub(crate) const SESSION_ID: HeaderName = HeaderName::from_static(mcp::SESSION_ID_HEADER);
pub(crate) const PROTOCOL_VERSION: HeaderName =
    HeaderName::from_static(mcp::PROTOCOL_VERSION_HEADER);

/// What the upstream told us about its session, each set once.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) session_id: OnceLock<HeaderValue>,
    pub(crate) version: OnceLock<HeaderValue>,
    /// Set, and `ready` woken, once the upstream answered initialize (with or without a
    /// session id: a stateless server gives none).
    pub(crate) initialized: AtomicBool,
    pub(crate) ready: tokio::sync::Notify,
    /// The principal's credential toward the server, when it is not a static header.
    pub(crate) credential: Option<Arc<dyn Credential>>,
}

impl State {
    /// Adds the session id and the negotiated version to `h`; whether there was an id.
    pub(crate) fn stamp(&self, h: &mut HeaderMap) -> bool {
        if let Some(v) = self.version.get() {
            h.insert(PROTOCOL_VERSION, v.clone());
        }
        match self.session_id.get() {
            Some(sid) => {
                h.insert(SESSION_ID, sid.clone());
                true
            }
            None => false,
        }
    }

    /// Waits until the upstream answered initialize.
    pub(crate) async fn ready(&self) {
        loop {
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.initialized.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

/// How a sealed session's upstream starts: fresh (`session: None`, initialize comes next)
/// or resumed from a sealed id (no initialize: the upstream already has the session).
#[derive(Debug, Clone, Default)]
pub struct Resume {
    /// What the upstream said about its session, when resuming one.
    pub session: Option<Resumed>,
}

/// What a Streamable HTTP upstream said about its session when initialize was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// Its `Mcp-Session-Id` (`None`: a stateless server, which gives none).
    pub session_id: Option<String>,
    /// The negotiated protocol version.
    pub version: String,
}
