//! The era bridge's upstream for a session-era client of a server that speaks only MCP
//! 2026-07-28: the client's session lives here (the server has none). `initialize` is
//! answered from the server's `server/discover`; every other request goes upstream on its
//! own with the envelope the session declared (`mcpgate-bridge` translates);
//! `logging/setLevel`, `ping` and `resources/(un)subscribe` are session state answered
//! here. An `input_required` answer becomes requests to the client on the request's
//! stream; their answers (which the client sends as responses) make the retry. The
//! client's GET stream is one upstream `subscriptions/listen`, opened again when the
//! subscriptions change. Nothing to delete at the end: the streams just stop.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue};
use mcpgate_bridge::SessionState;
use mcpgate_jsonrpc::{Id, Message, mcp};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::endpoint::Endpoint;
use crate::error::{Teardown, UpstreamError};
use crate::modern_wire::{ModernRequest, ModernResponse, exchange};
use crate::replies::Replies;
use crate::sink::Opening;

/// Where the bridge sends: the server's endpoint, resolved once, and the bound on an
/// answer's head.
#[derive(Debug, Clone)]
struct Wire {
    endpoint: Arc<Endpoint>,
    timeout: std::time::Duration,
}

impl Wire {
    async fn post(&self, req: ModernRequest) -> Result<ModernResponse, UpstreamError> {
        exchange(&self.endpoint, self.timeout, req).await
    }
}

/// A session-era session held for its client in front of a 2026-07-28-only server.
#[derive(Debug)]
pub struct BridgedUpstream {
    wire: Wire,
    o: Opening,
    /// Plain mutexes, never held across an `.await`.
    state: Mutex<SessionState>,
    /// The client's answers awaited, by the id of the request put to it.
    asks: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
    /// Calls in flight by the client's id (its `notifications/cancelled` stops one).
    calls: Arc<Mutex<HashMap<String, CancellationToken>>>,
    subscriptions: Mutex<BTreeSet<String>>,
    /// The open listen stream, if the client opened its GET stream.
    listening: Mutex<Option<CancellationToken>>,
    /// The tools' `x-mcp-header` annotations, once learned from a `tools/list`.
    annotations: Arc<Mutex<Option<mcpgate_bridge::Annotations>>>,
    next: AtomicU64,
}

fn parse(b: Bytes) -> Result<Message, UpstreamError> {
    Message::parse(b).map_err(|e| UpstreamError::Protocol(e.to_string()))
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
fn invalid(id: Option<&Id>, why: &str) -> Result<Message, UpstreamError> {
    parse(
        mcpgate_jsonrpc::JsonRpcError::new(
            mcpgate_jsonrpc::error::INVALID_PARAMS,
            format!("Invalid params: {why}"),
        )
        .to_body(id),
    )
}

/// The empty result `{}` for request `id` (session state the gateway answers).
fn done(id: Option<&Id>) -> Result<Message, UpstreamError> {
    parse(mcpgate_jsonrpc::result_body(id, "{}"))
}

impl BridgedUpstream {
    pub(crate) fn new(endpoint: Arc<Endpoint>, timeout: std::time::Duration, o: Opening) -> Self {
        BridgedUpstream {
            wire: Wire { endpoint, timeout },
            o,
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

    fn headers(method: &str, name: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            mcp::PROTOCOL_VERSION_HEADER,
            HeaderValue::from_static(mcp::MODERN_PROTOCOL_VERSION),
        );
        if let Ok(v) = HeaderValue::from_str(method) {
            h.insert(mcp::METHOD_HEADER, v);
        }
        if let Some(v) = name.and_then(|n| {
            HeaderValue::from_str(&mcpgate_jsonrpc::modern::encode_header_value(n)).ok()
        }) {
            h.insert(mcp::NAME_HEADER, v);
        }
        h
    }

    pub(crate) async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        let method = msg.method().unwrap_or("").to_owned();
        match method.as_str() {
            mcp::INITIALIZE => self.initialize(&msg).await,
            "ping" => Ok(Replies::one(done(msg.id())?)),
            "logging/setLevel" => {
                let v: Value = serde_json::from_slice(msg.raw()).unwrap_or(Value::Null);
                let level = v
                    .pointer("/params/level")
                    .and_then(Value::as_str)
                    .filter(|l| LEVELS.contains(l));
                let Some(level) = level else {
                    return Ok(Replies::one(invalid(
                        msg.id(),
                        "logging/setLevel needs a level (debug … emergency)",
                    )?));
                };
                if let Ok(mut s) = self.state.lock() {
                    s.log_level = Some(level.to_owned());
                }
                Ok(Replies::one(done(msg.id())?))
            }
            "resources/subscribe" | "resources/unsubscribe" => {
                let v: Value = serde_json::from_slice(msg.raw()).unwrap_or(Value::Null);
                let Some(uri) = v.pointer("/params/uri").and_then(Value::as_str) else {
                    return Ok(Replies::one(invalid(msg.id(), "a uri is needed")?));
                };
                if let Ok(mut subs) = self.subscriptions.lock() {
                    if method == "resources/subscribe" {
                        subs.insert(uri.to_owned());
                    } else {
                        subs.remove(uri);
                    }
                }
                // A listen stream open with the old filter is opened again with the new.
                if self.listening.lock().is_ok_and(|l| l.is_some()) {
                    self.open_listen();
                }
                Ok(Replies::one(done(msg.id())?))
            }
            _ => Ok(self.call(msg)),
        }
    }

    async fn initialize(&self, msg: &Message) -> Result<Replies, UpstreamError> {
        let st = SessionState::from_initialize(msg);
        let body = mcpgate_bridge::discover_request("mcpgate-discover", &st);
        let resp = self
            .wire
            .post(ModernRequest {
                body,
                headers: Self::headers(mcp::DISCOVER, None),
            })
            .await?;
        let mut messages = messages(resp.body, resp.headers.get(http::header::CONTENT_TYPE));
        let discover = loop {
            match messages.next().await {
                Some(Ok(m)) if m.is_response() => break m,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(UpstreamError::Protocol(
                        "no answer to server/discover".into(),
                    ));
                }
            }
        };
        let result = mcpgate_bridge::initialize_result(msg, &discover)
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        if let Ok(mut s) = self.state.lock() {
            *s = st;
        }
        Ok(Replies::one(parse(result)?))
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
        self.o.tasks.spawn(async move {
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
            let v: Value = serde_json::from_slice(msg.raw()).unwrap_or(Value::Null);
            // The id as the gateway made it (a JSON string), whatever escapes the client used.
            let id = msg
                .id()
                .and_then(|i| serde_json::from_str::<String>(i.as_raw()).ok());
            let waiter = id.and_then(|i| self.asks.lock().ok()?.remove(&i));
            match waiter {
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

    pub(crate) fn listen(&self) {
        if self.listening.lock().is_ok_and(|l| l.is_none()) {
            self.open_listen();
        }
    }

    /// (Re)opens the upstream listen stream with the current subscriptions.
    fn open_listen(&self) {
        let stop = self.o.cancel.child_token();
        if let Ok(mut l) = self.listening.lock()
            && let Some(old) = l.replace(stop.clone())
        {
            old.cancel();
        }
        let uris: Vec<String> = self
            .subscriptions
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut st = self.state();
        st.log_level = None;
        let body = json!({"jsonrpc": "2.0", "id": format!("mcpgate-listen-{}", self.next.fetch_add(1, Ordering::Relaxed)),
            "method": mcp::LISTEN, "params": {"notifications": {"toolsListChanged": true,
            "promptsListChanged": true, "resourcesListChanged": true, "resourceSubscriptions": uris}}});
        let Ok((body, _)) = parse(Bytes::from(body.to_string()))
            .map_err(|e| e.to_string())
            .and_then(|m| mcpgate_bridge::to_modern_request(&m, &st).map_err(|e| e.to_string()))
        else {
            return;
        };
        let (wire, sink, label) = (self.wire.clone(), self.o.sink.clone(), self.o.label.clone());
        self.o.tasks.spawn(async move {
            let run = async {
                let resp = wire
                    .post(ModernRequest { body, headers: Self::headers(mcp::LISTEN, None) })
                    .await?;
                let mut m = messages(resp.body, resp.headers.get(http::header::CONTENT_TYPE));
                while let Some(item) = m.next().await {
                    let msg = item?;
                    if msg.method() != Some("notifications/subscriptions/acknowledged") && !msg.is_response() {
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

/// One bridged call (owned by its task).
struct Call {
    wire: Wire,
    state: SessionState,
    asks: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
    label: Arc<str>,
    round: u64,
    annotations: Arc<Mutex<Option<mcpgate_bridge::Annotations>>>,
}

/// The questions of one round, forgotten when it ends (answered, cancelled, timed out).
struct Asked {
    asks: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
    ids: Vec<String>,
}

impl Drop for Asked {
    fn drop(&mut self) {
        if let Ok(mut a) = self.asks.lock() {
            for id in &self.ids {
                a.remove(id);
            }
        }
    }
}

/// Rounds of `input_required` a call may take (the SDK clients allow 10).
const MAX_ROUNDS: usize = 10;

impl Call {
    async fn run(self, msg: Message, tx: &mpsc::Sender<Result<Message, UpstreamError>>) {
        if let Err(e) = self.rounds(&msg, tx).await {
            // The server keeps no session: a broken exchange fails this request only, not
            // the client's session (which a fatal error would end).
            let e = match e {
                UpstreamError::Io(m) | UpstreamError::Connect(m) | UpstreamError::Ended(m) => {
                    UpstreamError::Protocol(format!("this request's exchange failed: {m}"))
                }
                e => e,
            };
            let _ = tx.send(Err(e)).await;
        }
    }

    async fn rounds(
        &self,
        msg: &Message,
        tx: &mpsc::Sender<Result<Message, UpstreamError>>,
    ) -> Result<(), UpstreamError> {
        let method = msg.method().unwrap_or("").to_owned();
        let (mut body, name) = mcpgate_bridge::to_modern_request(msg, &self.state)
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let original = body.clone();
        let params = if method == "tools/call" {
            self.param_headers(msg, name.as_deref()).await
        } else {
            Vec::new()
        };
        for round in 0..MAX_ROUNDS {
            let mut headers = BridgedUpstream::headers(&method, name.as_deref());
            for (k, v) in &params {
                if let (Ok(k), Ok(v)) = (
                    http::HeaderName::from_bytes(k.as_bytes()),
                    HeaderValue::from_str(v),
                ) {
                    headers.insert(k, v);
                }
            }
            let resp = self
                .wire
                .post(ModernRequest {
                    body: body.clone(),
                    headers,
                })
                .await?;
            let mut messages = messages(resp.body, resp.headers.get(http::header::CONTENT_TYPE));
            let answer = loop {
                match messages.next().await {
                    Some(Ok(m)) if m.is_response() => break m,
                    Some(Ok(m)) => {
                        if tx.send(Ok(m)).await.is_err() {
                            return Ok(());
                        }
                    }
                    Some(Err(e)) => return Err(e),
                    None => {
                        return Err(UpstreamError::Protocol(
                            "the upstream answer ended without a response".into(),
                        ));
                    }
                }
            };
            if method == "tools/list" {
                self.learn(&answer);
            }
            let Some(asked) = mcpgate_bridge::asked(&answer) else {
                let out = match msg.id() {
                    Some(id) => answer
                        .with_id(id)
                        .map_err(|e| UpstreamError::Protocol(e.to_string()))?,
                    None => answer,
                };
                let _ = tx.send(Ok(out)).await;
                return Ok(());
            };
            // The questions go to the client on this request's stream, under ids of the
            // gateway's own (no server text in them); the guard forgets every one of them
            // however this round ends.
            let mut answers = Map::new();
            let mut waiting = Vec::new();
            let mut asked_ids = Asked {
                asks: self.asks.clone(),
                ids: Vec::new(),
            };
            for (i, (k, ask)) in asked.requests.iter().enumerate() {
                let id = format!("mcpgate-ask-{}-{round}-{i}", self.round);
                let q = parse(mcpgate_bridge::server_request(&id, ask))?;
                let (w, r) = oneshot::channel();
                if let Ok(mut a) = self.asks.lock() {
                    a.insert(id.clone(), w);
                }
                asked_ids.ids.push(id.clone());
                if tx.send(Ok(q)).await.is_err() {
                    return Ok(());
                }
                waiting.push((k.clone(), id, r));
            }
            for (k, id, r) in waiting {
                match r.await {
                    Ok(v) => {
                        answers.insert(k, v);
                    }
                    Err(_) => {
                        debug!(session = %self.label, question = %id, "bridge: a question went unanswered");
                    }
                }
            }
            drop(asked_ids);
            let rid = Id::from_raw(&format!("\"mcpgate-retry-{}-{round}\"", self.round))
                .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
            body = mcpgate_bridge::retry(&original, &rid, answers, asked.state.as_deref())
                .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        }
        Err(UpstreamError::Protocol(format!(
            "more than {MAX_ROUNDS} input_required rounds"
        )))
    }
}

impl Call {
    /// Remembers the `x-mcp-header` annotations of a `tools/list` answer.
    fn learn(&self, answer: &Message) {
        let v: Value = serde_json::from_slice(answer.raw()).unwrap_or(Value::Null);
        let Some(r) = v.get("result") else { return };
        let found = mcpgate_bridge::annotations(r);
        if let Ok(mut a) = self.annotations.lock() {
            a.get_or_insert_with(Default::default).extend(found);
        }
    }

    /// The `Mcp-Param-*` headers of a `tools/call` (the client SDKs send them; a server
    /// must refuse a call whose annotated argument has no header). The annotations come
    /// from the session's `tools/list`; a call before any is asked for them first.
    async fn param_headers(&self, msg: &Message, tool: Option<&str>) -> Vec<(String, String)> {
        let Some(tool) = tool else { return Vec::new() };
        if self.annotations.lock().is_ok_and(|a| a.is_none()) {
            let list = json!({"jsonrpc": "2.0", "id": format!("mcpgate-tools-{}", self.round), "method": "tools/list"});
            let asked = parse(Bytes::from(list.to_string())).and_then(|m| {
                mcpgate_bridge::to_modern_request(&m, &self.state)
                    .map_err(|e| UpstreamError::Protocol(e.to_string()))
            });
            if let Ok((body, _)) = asked
                && let Ok(resp) = self
                    .wire
                    .post(ModernRequest {
                        body,
                        headers: BridgedUpstream::headers("tools/list", None),
                    })
                    .await
            {
                let mut m = messages(resp.body, resp.headers.get(http::header::CONTENT_TYPE));
                while let Some(Ok(a)) = m.next().await {
                    if a.is_response() {
                        self.learn(&a);
                        break;
                    }
                }
            }
        }
        let v: Value = serde_json::from_slice(msg.raw()).unwrap_or(Value::Null);
        let args = v
            .pointer("/params/arguments")
            .cloned()
            .unwrap_or(Value::Null);
        self.annotations
            .lock()
            .ok()
            .and_then(|a| {
                a.as_ref()?
                    .get(tool)
                    .map(|ann| mcpgate_bridge::param_headers(ann, &args))
            })
            .unwrap_or_default()
    }
}

/// The JSON-RPC messages of a 2026-07-28 answer body (one JSON message, or SSE events).
fn messages(
    body: futures::stream::BoxStream<'static, Result<Bytes, UpstreamError>>,
    content_type: Option<&HeaderValue>,
) -> futures::stream::BoxStream<'static, Result<Message, UpstreamError>> {
    let sse = content_type
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if sse {
        sse_stream::SseStream::from_bytes_stream(body)
            .filter_map(|ev| async move {
                match ev {
                    Ok(ev) => ev
                        .data
                        .filter(|d| !d.is_empty())
                        .map(|d| parse(Bytes::from(d))),
                    Err(e) => Some(Err(UpstreamError::Io(e.to_string()))),
                }
            })
            .boxed()
    } else {
        futures::stream::once(async move {
            let mut all = Vec::new();
            let mut body = body;
            while let Some(chunk) = body.next().await {
                all.extend_from_slice(&chunk?);
            }
            parse(Bytes::from(all))
        })
        .boxed()
    }
}
