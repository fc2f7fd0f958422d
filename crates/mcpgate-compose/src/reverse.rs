//! The era bridge toward a server that speaks only MCP 2026-07-28, for a session-era
//! client: the client's session lives here (the server has none). `initialize` is
//! answered from the server's `server/discover`; every other request goes upstream on its
//! own with the envelope the session declared (`mcpgate-bridge` translates);
//! `logging/setLevel`, `ping` and `resources/(un)subscribe` are session state answered
//! here. An `input_required` answer becomes requests to the client on the request's
//! stream (`reverse_call.rs`); their answers (which the client sends as responses) make
//! the retry. The client's GET stream is one upstream `subscriptions/listen`, opened again
//! when the subscriptions change. Nothing to delete at the end: the streams just stop.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use mcpgate_bridge::SessionState;
use mcpgate_jsonrpc::{Id, JsonRpcError, Message, Method};
use mcpgate_upstream::{Opening, Replies, Teardown, UpstreamError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

use crate::reverse_call::Call;
use crate::reverse_wire::{Asks, Wire, headers};

/// A session-era session held for its client in front of a 2026-07-28-only server.
#[derive(Debug)]
pub struct Reverse {
    wire: Wire,
    o: Opening,
    tasks: TaskTracker,
    /// Plain mutexes, never held across an `.await`.
    state: Mutex<SessionState>,
    asks: Asks,
    /// Calls in flight by the client's id (its `notifications/cancelled` stops one).
    calls: Arc<Mutex<HashMap<String, CancellationToken>>>,
    subscriptions: Mutex<BTreeSet<String>>,
    /// The open listen stream, if the client opened its GET stream.
    listening: Mutex<Option<CancellationToken>>,
    /// The tools' `x-mcp-header` annotations, once learned from a `tools/list`.
    annotations: Arc<Mutex<Option<mcpgate_bridge::Annotations>>>,
    next: AtomicU64,
}

/// The log levels (RFC 5424 severities) `logging/setLevel` takes.
const LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A `-32602` answer to request `id`.
fn invalid(id: Option<&Id>, why: &str) -> Result<Replies, UpstreamError> {
    let body = JsonRpcError::new(
        mcpgate_jsonrpc::error::INVALID_PARAMS,
        format!("Invalid params: {why}"),
    )
    .to_body(id);
    Ok(Replies::one(Message::parse(body)?))
}

/// The empty result `{}` for request `id` (session state the gateway answers).
fn done(id: Option<&Id>) -> Result<Replies, UpstreamError> {
    Ok(Replies::one(Message::parse(mcpgate_jsonrpc::result_body(
        id, "{}",
    ))?))
}

impl Reverse {
    pub(crate) fn new(wire: Wire, o: Opening, tasks: TaskTracker) -> Self {
        Reverse {
            wire,
            o,
            tasks,
            state: Mutex::new(SessionState::default()),
            asks: Arc::default(),
            calls: Arc::default(),
            subscriptions: Mutex::new(BTreeSet::new()),
            listening: Mutex::new(None),
            annotations: Arc::default(),
            next: AtomicU64::new(1),
        }
    }

    fn state(&self) -> SessionState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub(crate) async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        match msg.method() {
            Some(Method::Initialize) => self.initialize(&msg).await,
            Some(Method::Ping) => done(msg.id()),
            Some(Method::SetLevel) => self.set_level(&msg),
            Some(m @ (Method::ResourcesSubscribe | Method::ResourcesUnsubscribe)) => {
                let subscribe = *m == Method::ResourcesSubscribe;
                self.subscribe(&msg, subscribe)
            }
            _ => Ok(self.call(msg)),
        }
    }

    fn set_level(&self, msg: &Message) -> Result<Replies, UpstreamError> {
        let v: Value = serde_json::from_slice(msg.raw()).unwrap_or(Value::Null);
        let level = v
            .pointer("/params/level")
            .and_then(Value::as_str)
            .filter(|l| LEVELS.contains(l));
        let Some(level) = level else {
            return invalid(
                msg.id(),
                "logging/setLevel needs a level (debug … emergency)",
            );
        };
        if let Ok(mut s) = self.state.lock() {
            s.log_level = Some(level.to_owned());
        }
        done(msg.id())
    }

    fn subscribe(&self, msg: &Message, subscribe: bool) -> Result<Replies, UpstreamError> {
        let v: Value = serde_json::from_slice(msg.raw()).unwrap_or(Value::Null);
        let Some(uri) = v.pointer("/params/uri").and_then(Value::as_str) else {
            return invalid(msg.id(), "a uri is needed");
        };
        if let Ok(mut subs) = self.subscriptions.lock() {
            if subscribe {
                subs.insert(uri.to_owned());
            } else {
                subs.remove(uri);
            }
        }
        // A listen stream open with the old filter is opened again with the new.
        if self.listening.lock().is_ok_and(|l| l.is_some()) {
            self.open_listen();
        }
        done(msg.id())
    }

    async fn initialize(&self, msg: &Message) -> Result<Replies, UpstreamError> {
        let st = SessionState::from_initialize(msg);
        let body = mcpgate_bridge::discover_request("mcpgate-discover", &st);
        let discover = self
            .wire
            .ask(body, headers(&Method::Discover, None))
            .await?;
        let result =
            mcpgate_bridge::initialize_result(msg, &discover).map_err(UpstreamError::translate)?;
        if let Ok(mut s) = self.state.lock() {
            *s = st;
        }
        Ok(Replies::one(Message::parse(result)?))
    }

    /// A request sent upstream on its own, its `input_required` rounds played with the
    /// client; the replies end with the response under the client's id.
    fn call(&self, msg: Message) -> Replies {
        let (tx, rx) = mpsc::channel(64);
        let stop = self.o.cancel.child_token();
        let key = msg.id().map(|i| i.as_raw().to_owned());
        if let (Some(k), Ok(mut calls)) = (&key, self.calls.lock()) {
            calls.insert(k.clone(), stop.clone());
        }
        let run = Call {
            wire: self.wire.clone(),
            state: self.state(),
            asks: self.asks.clone(),
            label: self.o.label.clone(),
            round: self.next.fetch_add(1, Ordering::Relaxed),
            annotations: self.annotations.clone(),
        };
        let calls = self.calls.clone();
        let stop2 = stop.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = stop2.cancelled() => {}
                () = run.run(msg, &tx) => {}
            }
            if let (Some(k), Ok(mut c)) = (key, calls.lock()) {
                c.remove(&k);
            }
        });
        Replies::channel(rx, Box::new(stop.drop_guard()))
    }

    pub(crate) async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        if msg.is_response() {
            self.answered(&msg);
            return Ok(());
        }
        if let Some(id) = msg.cancelled_request_id()
            && let Some(t) = self
                .calls
                .lock()
                .ok()
                .and_then(|mut c| c.remove(id.as_raw()))
        {
            t.cancel();
        }
        // notifications/initialized and the like: session-era only.
        Ok(())
    }

    /// The client answered a question a call put to it.
    fn answered(&self, msg: &Message) {
        let v: Value = serde_json::from_slice(msg.raw()).unwrap_or(Value::Null);
        // The id as the gateway made it (a JSON string), whatever escapes the client used.
        let id = msg
            .id()
            .and_then(|i| serde_json::from_str::<String>(i.as_raw()).ok());
        match id.and_then(|i| self.asks.lock().ok()?.remove(&i)) {
            Some(w) => {
                let r = v
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| json!({"action": "cancel"}));
                let _ = w.send(r);
            }
            None => {
                debug!(session = %self.o.label, "a response to no question of the bridge; dropped")
            }
        }
    }

    pub(crate) fn listen(&self) {
        if self.listening.lock().is_ok_and(|l| l.is_none()) {
            self.open_listen();
        }
    }

    /// The `subscriptions/listen` request for the current subscriptions.
    fn listen_request(&self) -> Result<Bytes, UpstreamError> {
        let uris: Vec<String> = self
            .subscriptions
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut st = self.state();
        st.log_level = None;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": format!("mcpgate-listen-{n}"),
            "method": Method::Listen.as_str(), "params": {"notifications": {"toolsListChanged": true,
            "promptsListChanged": true, "resourcesListChanged": true, "resourceSubscriptions": uris}}});
        let msg = Message::parse(Bytes::from(body.to_string()))?;
        mcpgate_bridge::to_modern_request(&msg, &st)
            .map(|(body, _)| body)
            .map_err(UpstreamError::translate)
    }

    /// (Re)opens the upstream listen stream with the current subscriptions.
    fn open_listen(&self) {
        let stop = self.o.cancel.child_token();
        if let Ok(mut l) = self.listening.lock()
            && let Some(old) = l.replace(stop.clone())
        {
            old.cancel();
        }
        let body = match self.listen_request() {
            Ok(b) => b,
            Err(e) => {
                debug!(session = %self.o.label, error = %e, "bridge: cannot make the listen request");
                return;
            }
        };
        let (wire, sink, label) = (self.wire.clone(), self.o.sink.clone(), self.o.label.clone());
        self.tasks.spawn(async move {
            let run = async {
                let mut m = wire.post(body, headers(&Method::Listen, None)).await?;
                while let Some(item) = m.next().await {
                    let msg = item?;
                    if !msg.is(&Method::Acknowledged) && !msg.is_response() {
                        sink.message(msg);
                    }
                }
                Ok::<(), UpstreamError>(())
            };
            tokio::select! {
                () = stop.cancelled() => {}
                r = run => if let Err(e) = r { debug!(session = %label, error = %e, "bridge: the upstream listen stream ended"); },
            }
        });
    }

    pub(crate) async fn close(&self) -> Teardown {
        if let Ok(mut l) = self.listening.lock()
            && let Some(t) = l.take()
        {
            t.cancel();
        }
        Teardown::NothingToDelete(None)
    }
}
