//! Request multiplexing over one message pipe (a stdio child, a legacy SSE session).
//!
//! A pipe carries every message of the session in both directions, so the gateway itself
//! must decide where each upstream message goes — always within the one session that
//! owns the pipe:
//! - every request is sent with a fresh numeric id; the response is mapped back to the
//!   client's id and delivered to that request's [`Replies`] only. A client that reuses an
//!   id can therefore never receive another request's answer; a late response to an
//!   abandoned request is dropped with a log line.
//! - a `notifications/progress` follows its `progressToken` to the request that carried it.
//! - a client's `notifications/cancelled` is rewritten to the id the upstream knows.
//! - every other server message goes to the session's [`EventSink`], in pipe order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mcpgate_jsonrpc::{Id, Kind, Message, Method};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::error::{ProtocolError, UpstreamError};
use crate::replies::Replies;
use crate::sink::EventSink;

type ReplyTx = mpsc::Sender<Result<Message, UpstreamError>>;

/// Requests in flight toward the upstream, by the id the upstream saw.
#[derive(Default)]
struct Pending {
    by_upstream: HashMap<u64, Entry>,
    by_token: HashMap<Id, u64>,
    by_client: HashMap<Id, u64>,
    /// Set once the pipe ended (with why): no new request may register.
    closed: Option<UpstreamError>,
}

struct Entry {
    client_id: Id,
    token: Option<Id>,
    tx: ReplyTx,
}

impl Pending {
    fn remove(&mut self, n: u64) -> Option<Entry> {
        let e = self.by_upstream.remove(&n)?;
        if let Some(t) = &e.token
            && self.by_token.get(t) == Some(&n)
        {
            self.by_token.remove(t);
        }
        if self.by_client.get(&e.client_id) == Some(&n) {
            self.by_client.remove(&e.client_id);
        }
        Some(e)
    }
}

/// The id map of one pipe. Plain mutex: held for map updates only, never across an
/// `.await`.
#[derive(Clone, Default)]
pub(crate) struct Mux {
    pending: Arc<Mutex<Pending>>,
    next_id: Arc<AtomicU64>,
}

/// Unregisters a request when its [`Replies`] is dropped (answered or abandoned).
struct Guard {
    pending: Arc<Mutex<Pending>>,
    n: u64,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut p) = self.pending.lock() {
            p.remove(self.n);
        }
    }
}

impl Mux {
    /// Registers a client request; returns the message to send upstream (with the
    /// gateway's id) and the stream its replies will arrive on.
    pub(crate) fn register(&self, msg: &Message) -> Result<(Message, Replies), UpstreamError> {
        let Kind::Request { id: client_id, .. } = msg.kind() else {
            return Err(ProtocolError::NotARequest.into());
        };
        let n = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let out = msg.with_id(&Id::number(n))?;
        let token = msg.progress_token();
        let (tx, rx) = mpsc::channel(64);
        {
            let mut p = self.pending.lock().map_err(|_| UpstreamError::Closed)?;
            if let Some(why) = &p.closed {
                return Err(why.clone());
            }
            if let Some(t) = &token {
                p.by_token.insert(t.clone(), n);
            }
            p.by_client.insert(client_id.clone(), n);
            p.by_upstream.insert(
                n,
                Entry {
                    client_id: client_id.clone(),
                    token,
                    tx,
                },
            );
        }
        let guard = Guard {
            pending: self.pending.clone(),
            n,
        };
        Ok((
            out,
            Replies::channel(rx, Box::new(guard)).with_upstream_id(Id::number(n)),
        ))
    }

    /// Prepares a client notification or response for the upstream: a cancellation is
    /// rewritten to the upstream's id of the request; `None` means there is nothing left
    /// to cancel and the message should not be sent.
    pub(crate) fn outgoing(
        &self,
        msg: Message,
        label: &str,
    ) -> Result<Option<Message>, UpstreamError> {
        let Some(client_id) = msg.cancelled_request_id() else {
            return Ok(Some(msg));
        };
        let n = self
            .pending
            .lock()
            .ok()
            .and_then(|p| p.by_client.get(&client_id).copied());
        match n {
            Some(n) => msg
                .with_cancelled_request_id(&Id::number(n))
                .map(Some)
                .map_err(UpstreamError::from),
            None => {
                debug!(session = %label, id = %client_id, "cancellation for a request no longer in flight; dropped");
                Ok(None)
            }
        }
    }

    /// Delivers one message that came up the pipe.
    ///
    /// Never waits: the reader of a pipe must not stall because one request's client reads
    /// slowly (that would hold every other message of the pipe). A request's queue keeps
    /// its last slot for the response; a notification that finds the rest full goes to the
    /// session like an unrelated message (its streams, else its bounded backlog, which
    /// counts what it drops).
    pub(crate) fn incoming(&self, msg: Message, sink: &dyn EventSink, label: &str) {
        let target = match msg.kind() {
            Kind::Response { id } => {
                let entry = id
                    .as_ref()
                    .and_then(Id::as_u64)
                    .and_then(|n| self.pending.lock().ok().and_then(|mut p| p.remove(n)));
                let Some(entry) = entry else {
                    debug!(session = %label, id = ?id, "response to no request in flight (cancelled or abandoned); dropped");
                    return;
                };
                match msg.with_id(&entry.client_id) {
                    Ok(m) => {
                        // The slot kept for it is free (the reader is the only sender).
                        if entry.tx.try_send(Ok(m)).is_err() {
                            debug!(session = %label, "response for an abandoned request; dropped");
                        }
                    }
                    Err(e) => warn!(session = %label, error = %e, "cannot map response id back"),
                }
                return;
            }
            Kind::Notification {
                method: Method::Progress,
            } => msg.progress_token().and_then(|t| {
                let p = self.pending.lock().ok()?;
                let n = p.by_token.get(&t)?;
                p.by_upstream.get(n).map(|e| e.tx.clone())
            }),
            _ => None,
        };
        match target {
            Some(tx) if tx.is_closed() => {
                debug!(session = %label, "progress for an abandoned request; dropped");
            }
            Some(tx) if tx.capacity() > 1 => {
                if let Err(e) = tx.try_send(Ok(msg)) {
                    debug!(session = %label, error = %e, "progress for a request could not be queued; dropped");
                }
            }
            // The request's client reads slowly: the session gets it.
            Some(_) => sink.message(msg),
            None => sink.message(msg),
        }
    }

    /// The pipe ended: every request in flight fails with `why`, and no new one registers.
    pub(crate) fn close(&self, why: &UpstreamError) {
        let entries: Vec<Entry> = match self.pending.lock() {
            Ok(mut p) => {
                p.closed = Some(why.clone());
                p.by_token.clear();
                p.by_client.clear();
                p.by_upstream.drain().map(|(_, e)| e).collect()
            }
            Err(_) => Vec::new(),
        };
        for e in entries {
            let _ = e.tx.try_send(Err(why.clone()));
        }
    }
}
