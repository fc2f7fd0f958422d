//! Bridged calls held while their 2026-07-28 client answers an `input_required` result.
//!
//! A session-era server asks the client mid-call (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`); a 2026-07-28 client is asked with an
//! `input_required` result and answers by retrying the call. Between the two the call
//! stays open upstream: its exchange and the lease on its pooled session are held here,
//! under a random handle that is the result's `requestState`. Only the principal that
//! was asked may resume it (a foreign principal's attempt touches nothing); a held call
//! not resumed within its time is abandoned — the upstream's questions answered with an
//! error, the call cancelled — and its session goes back to the pool. Bounded in count.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dashmap::DashMap;
use mcpgate_jsonrpc::{Id, Message, Method};
use tracing::{debug, info};

use crate::bridge_lease::BridgeLease;
use crate::exchange::Exchange;
use crate::store::mint_id;

/// The code the upstream's unanswered questions get: the SDKs' `RequestTimeout`.
const CLIENT_TIMEOUT: i64 = -32001;

/// What identifies a call: a retry must be the same call (method and parameters) of the
/// same principal to the same server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallKey {
    /// The call's method.
    pub method: Method,
    /// What else identifies it (its parameters, see `mcpgate_bridge::Request::fingerprint`).
    pub fingerprint: String,
    /// Whose call it is.
    pub principal: Option<Arc<str>>,
    /// The server it is for.
    pub server: Arc<str>,
}

/// A call waiting for its client's answers.
#[derive(Debug)]
pub struct HeldCall {
    /// The pooled session serving it.
    pub lease: BridgeLease,
    /// The call, still open upstream.
    pub exchange: Exchange,
    /// The upstream's questions: the key they have in `inputRequests`, and the id of the
    /// upstream request to answer.
    pub pending: Vec<(String, Id)>,
    /// What identifies it.
    pub key: CallKey,
}

impl HeldCall {
    /// Answers the upstream's questions with an error, cancels the call (the client never
    /// came back) and ends the session: what the server may still send for that call must
    /// not reach the pool's next request.
    async fn abandon(self) {
        let session = self.lease.session().clone();
        for (_, id) in &self.pending {
            let answer = mcpgate_jsonrpc::JsonRpcError::new(
                CLIENT_TIMEOUT,
                "the client did not answer in time",
            )
            .to_body(Some(id));
            send(&session, answer).await;
        }
        if let Some(id) = self.exchange.request_id() {
            let cancel = mcpgate_jsonrpc::cancelled(
                id,
                "the client did not answer the input request in time",
            );
            send(&session, cancel).await;
        }
        drop(self.exchange);
        drop(session.close(crate::kinds::CloseReason::ClientGone));
        drop(self.lease);
    }
}

async fn send(session: &Arc<crate::session::Session>, b: Bytes) {
    let Ok(m) = Message::parse(b) else {
        return;
    };
    if let Err(e) = session.notify(m).await {
        debug!(session = %session.tag(), error = %e, "held call: could not write to the upstream");
    }
}

/// Removes a held call when its timer ends without resuming or abandoning it.
struct Forget(Arc<HeldCalls>, String);

impl Drop for Forget {
    fn drop(&mut self) {
        self.0.map.remove(&self.1);
    }
}

/// Why a `requestState` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unresumable {
    /// No call is held under it (never was, expired, already resumed, or tampered with).
    Unknown,
    /// A call is held under it, but for another principal, server or method.
    Foreign,
}

/// The held calls (owned by the front).
#[derive(Debug)]
pub struct HeldCalls {
    /// The mutex makes a held call (its exchange is `Send`, not `Sync`) shareable; it is
    /// only locked to check or take it.
    map: DashMap<String, std::sync::Mutex<HeldCall>>,
    max: usize,
    ttl: Duration,
    prefix: String,
}

impl HeldCalls {
    /// At most `max` calls held at once, each for at most `ttl`; handles start with
    /// `prefix` (the replica's).
    pub fn new(max: usize, ttl: Duration, prefix: &str) -> Arc<Self> {
        Arc::new(HeldCalls {
            map: DashMap::new(),
            max,
            ttl,
            prefix: prefix.to_owned(),
        })
    }

    /// Holds `call`; its handle is the `requestState` to hand the client. `Err` gives the
    /// call back when as many calls as allowed are held.
    pub fn hold(self: &Arc<Self>, call: HeldCall) -> Result<String, Box<HeldCall>> {
        // A session already ending would cancel the timer below before it ever ran.
        if self.map.len() >= self.max || call.lease.session().is_closing() {
            return Err(Box::new(call));
        }
        let handle = mint_id(&self.prefix);
        let session = call.lease.session().clone();
        self.map.insert(handle.clone(), std::sync::Mutex::new(call));
        let ttl = self.ttl;
        // Owned by the pooled session. The guard is made before the task, so that even a
        // task never polled (its session ending meanwhile) forgets the held call.
        let forget = Forget(self.clone(), handle.clone());
        session.spawn(async move {
            let forget = forget;
            tokio::time::sleep(ttl).await;
            let (me, h) = (&forget.0, &forget.1);
            if let Some(call) = me.map.remove(h).and_then(|(_, c)| c.into_inner().ok()) {
                info!(session = %call.lease.session().tag(), "input_required: the client did not come back in time; call abandoned");
                call.abandon().await;
            }
        });
        Ok(handle)
    }

    /// The call held under `handle` for the call `key` names — taken out.
    pub fn take(&self, handle: &str, key: &CallKey) -> Result<HeldCall, Unresumable> {
        let mine = |c: &HeldCall| c.key == *key;
        match self
            .map
            .remove_if(handle, |_, c| c.lock().is_ok_and(|c| mine(&c)))
        {
            Some((_, c)) => c.into_inner().map_err(|_| Unresumable::Unknown),
            None if self.map.contains_key(handle) => Err(Unresumable::Foreign),
            None => Err(Unresumable::Unknown),
        }
    }

    /// Calls held now.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
