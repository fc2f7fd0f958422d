//! One call through the era bridge toward a 2026-07-28-only server (owned by its task):
//! POSTed on its own with the session's envelope; each `input_required` answer becomes
//! requests to the client on the call's stream, whose answers make the retry.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use http::HeaderValue;
use mcpgate_bridge::SessionState;
use mcpgate_jsonrpc::{Id, Message, Method};
use mcpgate_upstream::{ProtocolError, UpstreamError};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use crate::reverse_wire::{Asks, Wire, headers};

/// Rounds of `input_required` a call may take (the SDK clients allow 10).
const MAX_ROUNDS: usize = 10;

type Tx = mpsc::Sender<Result<Message, UpstreamError>>;

/// One bridged call.
pub(crate) struct Call {
    pub(crate) wire: Wire,
    pub(crate) state: SessionState,
    pub(crate) asks: Asks,
    pub(crate) label: Arc<str>,
    pub(crate) round: u64,
    pub(crate) annotations: Arc<Mutex<Option<mcpgate_bridge::Annotations>>>,
}

/// The questions of one round, forgotten when it ends (answered, cancelled, timed out).
struct Asked {
    asks: Asks,
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

/// What a round ended with.
enum Round {
    /// The call is over (answered, or its client went away).
    Over,
    /// The server asked the client; the retry's body.
    Retry(Bytes),
}

impl Call {
    pub(crate) async fn run(self, msg: Message, tx: &Tx) {
        if let Err(e) = self.rounds(&msg, tx).await {
            // The server keeps no session: a broken exchange fails this request only, not
            // the client's session (which a fatal error would end).
            let e = match e {
                e
                @ (UpstreamError::Io(_) | UpstreamError::Connect(_) | UpstreamError::Ended(_)) => {
                    ProtocolError::Exchange(Box::new(e)).into()
                }
                e => e,
            };
            let _ = tx.send(Err(e)).await;
        }
    }

    async fn rounds(&self, msg: &Message, tx: &Tx) -> Result<(), UpstreamError> {
        let method = msg
            .method()
            .cloned()
            .unwrap_or_else(|| Method::Other("".into()));
        let (mut body, name) = mcpgate_bridge::to_modern_request(msg, &self.state)
            .map_err(UpstreamError::translate)?;
        let original = body.clone();
        let params = if method == Method::ToolsCall {
            self.param_headers(msg, name.as_deref()).await
        } else {
            Vec::new()
        };
        for round in 0..MAX_ROUNDS {
            let mut h = headers(&method, name.as_deref());
            for (k, v) in &params {
                if let (Ok(k), Ok(v)) = (
                    http::HeaderName::from_bytes(k.as_bytes()),
                    HeaderValue::from_str(v),
                ) {
                    h.insert(k, v);
                }
            }
            match self
                .round(msg, (&method, round), (body, h), &original, tx)
                .await?
            {
                Round::Over => return Ok(()),
                Round::Retry(next) => body = next,
            }
        }
        Err(ProtocolError::TooManyRounds(MAX_ROUNDS).into())
    }

    /// One POST of the call: its answer to the client, or the client asked and the
    /// retry's body made of its answers.
    async fn round(
        &self,
        msg: &Message,
        (method, round): (&Method, usize),
        (body, h): (Bytes, http::HeaderMap),
        original: &Bytes,
        tx: &Tx,
    ) -> Result<Round, UpstreamError> {
        let mut messages = self.wire.post(body, h).await?;
        let answer = loop {
            match messages.next().await {
                Some(Ok(m)) if m.is_response() => break m,
                // What the server relates to the call goes to the client as it comes.
                Some(Ok(m)) => {
                    if tx.send(Ok(m)).await.is_err() {
                        return Ok(Round::Over);
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Err(ProtocolError::NoResponse.into()),
            }
        };
        if *method == Method::ToolsList {
            self.learn(&answer);
        }
        let Some(asked) = mcpgate_bridge::asked(&answer) else {
            let out = match msg.id() {
                Some(id) => answer.with_id(id)?,
                None => answer,
            };
            let _ = tx.send(Ok(out)).await;
            return Ok(Round::Over);
        };
        let Some(answers) = self.put_to_client(&asked, round, tx).await? else {
            return Ok(Round::Over);
        };
        let rid = Id::from_raw(&format!("\"mcpgate-retry-{}-{round}\"", self.round))?;
        mcpgate_bridge::retry(original, &rid, answers, asked.state.as_deref())
            .map(Round::Retry)
            .map_err(UpstreamError::translate)
    }

    /// The server's questions go to the client on this call's stream, under ids of the
    /// gateway's own (no server text in them); their answers by key (`None`: the client
    /// went away). The guard forgets every question however the round ends.
    async fn put_to_client(
        &self,
        asked: &mcpgate_bridge::Asked,
        round: usize,
        tx: &Tx,
    ) -> Result<Option<Map<String, Value>>, UpstreamError> {
        let mut waiting = Vec::new();
        let mut guard = Asked {
            asks: self.asks.clone(),
            ids: Vec::new(),
        };
        for (i, (k, ask)) in asked.requests.iter().enumerate() {
            let id = format!("mcpgate-ask-{}-{round}-{i}", self.round);
            let q = Message::parse(mcpgate_bridge::server_request(&id, ask))?;
            let (w, r) = oneshot::channel();
            if let Ok(mut a) = self.asks.lock() {
                a.insert(id.clone(), w);
            }
            guard.ids.push(id.clone());
            if tx.send(Ok(q)).await.is_err() {
                return Ok(None);
            }
            waiting.push((k.clone(), id, r));
        }
        let mut answers = Map::new();
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
        Ok(Some(answers))
    }

    /// Remembers the `x-mcp-header` annotations of a `tools/list` answer.
    fn learn(&self, answer: &Message) {
        let v: Value = serde_json::from_slice(answer.raw()).unwrap_or(Value::Null);
        let Some(r) = v.get("result") else { return };
        let found = mcpgate_bridge::annotations(r);
        if let Ok(mut a) = self.annotations.lock() {
            a.get_or_insert_with(Default::default).extend(found);
        }
    }

    /// Lists the tools (a call before any listing), to learn their annotations.
    async fn list_tools(&self) -> Result<(), UpstreamError> {
        let list = json!({"jsonrpc": "2.0", "id": format!("mcpgate-tools-{}", self.round),
            "method": Method::ToolsList.as_str()});
        let m = Message::parse(Bytes::from(list.to_string()))?;
        let (body, _) =
            mcpgate_bridge::to_modern_request(&m, &self.state).map_err(UpstreamError::translate)?;
        let answer = self
            .wire
            .ask(body, headers(&Method::ToolsList, None))
            .await?;
        self.learn(&answer);
        Ok(())
    }

    /// The `Mcp-Param-*` headers of a `tools/call` (the client SDKs send them; a server
    /// must refuse a call whose annotated argument has no header). The annotations come
    /// from the session's `tools/list`; a call before any is asked for them first.
    async fn param_headers(&self, msg: &Message, tool: Option<&str>) -> Vec<(String, String)> {
        let Some(tool) = tool else { return Vec::new() };
        if self.annotations.lock().is_ok_and(|a| a.is_none())
            && let Err(e) = self.list_tools().await
        {
            debug!(session = %self.label, error = %e, "bridge: cannot list the tools for their annotations");
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
