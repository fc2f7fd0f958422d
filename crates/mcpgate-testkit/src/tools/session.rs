//! One session's MCP state and request handling: `initialize`, the tools, resources and
//! prompts, server-to-client requests (sampling, roots) awaiting the client's answer, and
//! cancellation of in-flight requests.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::catalogue::{
    Done, TOOLS, get_prompt, initialize_result, invalid, read_resource, text_result, tool_error,
    tool_name,
};
use super::messages::{notify, padded_notification, sampling_request};
use super::{FaultHooks, Outbound, Outcome, Standalone, Subscriptions, lock};
use crate::rpc::{INVALID_REQUEST, METHOD_NOT_FOUND, error_response, result_response};
use crate::stats::{StatsCell, bump};

/// What a server-to-client request waits for.
enum Waiter {
    /// An in-flight call (`sample`, `roots`) awaits the answer.
    Call(oneshot::Sender<Result<Value, Value>>),
    /// Nobody waits (`sample_async`): the answer is recorded in the stats.
    Record,
}

fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => format!("s:{s}"),
        other => format!("n:{other}"),
    }
}

/// Removes a map entry when the request that registered it finishes or is dropped.
struct Registered<'a, V> {
    map: &'a Mutex<HashMap<String, V>>,
    key: String,
}

impl<V> Drop for Registered<'_, V> {
    fn drop(&mut self) {
        lock(self.map).remove(&self.key);
    }
}

/// The MCP state of one session (one HTTP `Mcp-Session-Id`, or one stdio process).
pub(crate) struct McpSession {
    id: String,
    stats: Arc<StatsCell>,
    next_server_id: AtomicU64,
    /// What the `count` tool counts (this session's calls of it).
    counter: AtomicU64,
    /// Server-to-client requests awaiting the client's response, by id.
    pending: Mutex<HashMap<String, Waiter>>,
    /// Cancellable in-flight client requests, by [`id_key`].
    inflight: Mutex<HashMap<String, CancellationToken>>,
    ended: CancellationToken,
    /// This session's standalone channel.
    standalone: Standalone,
    /// The server's resource subscriptions (shared by all its sessions).
    subscriptions: Arc<Subscriptions>,
    /// Standalone messages to send once the current request's answer is out.
    deferred: Mutex<Vec<(Standalone, String)>>,
    /// Background work to start once the current request's answer is out
    /// (`flood` with `background`).
    deferred_work: Mutex<Vec<BoxFuture<'static, u64>>>,
    /// The transport's hooks for fault tools, if it has them.
    hooks: Option<Arc<dyn FaultHooks>>,
}

impl std::fmt::Debug for McpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl McpSession {
    /// A fresh session whose standalone messages go to `standalone`.
    pub(crate) fn new(
        id: String,
        stats: Arc<StatsCell>,
        standalone: Standalone,
        subscriptions: Arc<Subscriptions>,
    ) -> Self {
        Self {
            id,
            stats,
            next_server_id: AtomicU64::new(1),
            counter: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            ended: CancellationToken::new(),
            standalone,
            subscriptions,
            deferred: Mutex::new(Vec::new()),
            deferred_work: Mutex::new(Vec::new()),
            hooks: None,
        }
    }

    /// Gives the session its transport's hooks for the fault tools.
    pub(crate) fn with_hooks(mut self, hooks: Arc<dyn FaultHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Sends the standalone messages queued by requests handled so far
    /// (`sample_async`, `touch`); transports call this after delivering an answer.
    pub(crate) fn send_deferred(&self) {
        let deferred = std::mem::take(&mut *lock(&self.deferred));
        for (channel, msg) in deferred {
            // Undelivered standalone messages are the transport's to count or log.
            let _ = channel(msg);
        }
        let work = std::mem::take(&mut *lock(&self.deferred_work));
        for w in work {
            let ended = self.ended.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = ended.cancelled() => {}
                    _ = w => {}
                }
            });
        }
    }

    fn next_request_id(&self) -> String {
        format!("s-{}", self.next_server_id.fetch_add(1, Ordering::Relaxed))
    }

    /// This session's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Ends the session: hanging calls and sampling waits finish without answering.
    pub(crate) fn end(&self) {
        self.ended.cancel();
        lock(&self.pending).clear();
        lock(&self.deferred).clear();
        lock(&self.deferred_work).clear();
        self.subscriptions.forget(&self.id);
    }

    /// Handles a notification from the client.
    pub(crate) fn handle_notification(&self, method: &str, params: Option<&Value>) {
        bump(&self.stats.notifications_received);
        if method == "notifications/cancelled"
            && let Some(req) = params.and_then(|p| p.get("requestId"))
            && let Some(token) = lock(&self.inflight).remove(&id_key(req))
        {
            token.cancel();
        }
    }

    /// Handles the client's response to a server-to-client request.
    pub(crate) fn handle_response(&self, id: &Value, result: Option<Value>, error: Option<Value>) {
        bump(&self.stats.responses_received);
        let key = match id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let Some(waiter) = lock(&self.pending).remove(&key) else {
            return;
        };
        let answer = match (result, error) {
            (Some(r), _) => Ok(r),
            (None, e) => Err(e.unwrap_or(Value::Null)),
        };
        match waiter {
            // The waiter may have been cancelled meanwhile; nothing to do then.
            Waiter::Call(tx) => {
                let _ = tx.send(answer);
            }
            Waiter::Record => self.stats.record_sampled(match answer {
                Ok(r) => match r.pointer("/content/text").and_then(Value::as_str) {
                    Some(text) => text.to_owned(),
                    None => "<no text>".to_owned(),
                },
                Err(e) => format!("error: {e}"),
            }),
        }
    }

    /// Handles a request; `out` carries related messages (notifications,
    /// server-to-client requests) sent before the answer.
    pub(crate) async fn handle_request(
        &self,
        id: &Value,
        method: &str,
        params: Option<Value>,
        out: Option<&Outbound>,
    ) -> Outcome {
        bump(&self.stats.requests);
        let done = match method {
            "initialize" => Done::Ok(initialize_result(params.as_ref())),
            "ping" | "logging/setLevel" => Done::Ok(json!({})),
            "resources/subscribe" | "resources/unsubscribe" => {
                match params
                    .as_ref()
                    .and_then(|p| p.get("uri"))
                    .and_then(Value::as_str)
                {
                    Some(uri) if method == "resources/subscribe" => {
                        let channel = Arc::clone(&self.standalone);
                        self.subscriptions.subscribe(uri, &self.id, channel);
                        Done::Ok(json!({}))
                    }
                    Some(uri) => {
                        self.subscriptions.unsubscribe(uri, &self.id);
                        Done::Ok(json!({}))
                    }
                    None => invalid(format!("{method} needs a string `uri`")),
                }
            }
            "tools/list" => Done::Ok(TOOLS.clone()),
            "tools/call" => self.call_tool(id, params, out).await,
            "resources/list" => Done::Ok(json!({"resources": [
                {"uri": "test://static", "name": "static", "mimeType": "text/plain"}
            ]})),
            "resources/read" => read_resource(params.as_ref()),
            "prompts/list" => Done::Ok(json!({"prompts": [{
                "name": "greet", "description": "Greets someone.",
                "arguments": [{"name": "name", "description": "Who to greet", "required": true}]
            }]})),
            "prompts/get" => get_prompt(params.as_ref()),
            _ => Done::Err(METHOD_NOT_FOUND, format!("method not found: {method}")),
        };
        match done {
            Done::Ok(v) => Outcome::Reply(result_response(id, &v)),
            Done::Err(code, msg) => Outcome::Reply(error_response(id, code, &msg)),
            Done::Silent => Outcome::Silent,
            Done::Die => Outcome::Die,
        }
    }

    async fn call_tool(&self, id: &Value, params: Option<Value>, out: Option<&Outbound>) -> Done {
        let Some(params) = params else {
            return invalid("tools/call needs params");
        };
        let empty = Value::Object(Default::default());
        let args = params.get("arguments").unwrap_or(&empty);
        let str_arg = |k: &str| args.get(k).and_then(Value::as_str);
        let u64_arg = |k: &str| args.get(k).and_then(Value::as_u64);
        match tool_name(Some(&params)).unwrap_or_default() {
            "echo" => match str_arg("text") {
                Some(t) => Done::Ok(text_result(t)),
                None => invalid("echo needs a string `text`"),
            },
            "add" => match (
                args.get("a").and_then(Value::as_f64),
                args.get("b").and_then(Value::as_f64),
            ) {
                (Some(a), Some(b)) => {
                    let int = |k: &str| args.get(k).and_then(Value::as_i64);
                    let text = match (int("a"), int("b")) {
                        (Some(a), Some(b)) => a.wrapping_add(b).to_string(),
                        _ => (a + b).to_string(),
                    };
                    Done::Ok(text_result(text))
                }
                _ => invalid("add needs numbers `a` and `b`"),
            },
            "whoami" => Done::Ok(text_result(self.id.clone())),
            "count" => Done::Ok(text_result(
                (self.counter.fetch_add(1, Ordering::Relaxed) + 1).to_string(),
            )),
            "die" => Done::Die,
            "slow" => match u64_arg("ms") {
                Some(ms) => {
                    self.cancellable(id, async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Done::Ok(text_result(format!("slept {ms}")))
                    })
                    .await
                }
                None => invalid("slow needs an integer `ms`"),
            },
            "hang" => self.cancellable(id, std::future::pending()).await,
            "notify" => match (str_arg("tag"), u64_arg("count")) {
                (Some(tag), Some(count)) => {
                    let interval = u64_arg("interval_ms").unwrap_or(0);
                    let token = params.get("_meta").and_then(|m| m.get("progressToken"));
                    let work = notify(tag, count, interval, token, out);
                    self.cancellable(id, work).await
                }
                _ => invalid("notify needs a string `tag` and an integer `count`"),
            },
            "sample" => match str_arg("prompt") {
                Some(prompt) => self.cancellable(id, self.sample(prompt, out)).await,
                None => invalid("sample needs a string `prompt`"),
            },
            "sample_async" => match str_arg("prompt") {
                Some(prompt) => {
                    let sid = self.next_request_id();
                    lock(&self.pending).insert(sid.clone(), Waiter::Record);
                    let request = sampling_request(&sid, prompt);
                    let channel = Arc::clone(&self.standalone);
                    lock(&self.deferred).push((channel, request));
                    Done::Ok(text_result("queued"))
                }
                None => invalid("sample_async needs a string `prompt`"),
            },
            "roots" => self.cancellable(id, self.roots(out)).await,
            "touch" => match str_arg("uri") {
                Some(uri) => {
                    let note =
                        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                        "params": {"uri": uri}})
                        .to_string();
                    let subscribers = self.subscriptions.subscribers(uri);
                    let n = subscribers.len();
                    lock(&self.deferred).extend(subscribers.into_iter().map(|c| (c, note.clone())));
                    Done::Ok(text_result(format!("notified {n}")))
                }
                None => invalid("touch needs a string `uri`"),
            },
            "flood" => match u64_arg("count") {
                Some(count) => {
                    let size =
                        usize::try_from(u64_arg("size").unwrap_or(1024)).unwrap_or(usize::MAX);
                    let background = args
                        .get("background")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    self.flood(id, count, size, background).await
                }
                None => invalid("flood needs an integer `count`"),
            },
            "garbage" => match str_arg("kind") {
                Some(kind) => {
                    let mib = usize::try_from(u64_arg("mib").unwrap_or(10)).unwrap_or(10);
                    self.garbage(kind, mib, out)
                }
                None => invalid("garbage needs a string `kind`"),
            },
            // The HTTP transport answers it itself, before it gets here.
            "close_early" => tool_error("close_early only applies over HTTP"),
            "stats" => Done::Ok(text_result(
                serde_json::to_string(&self.stats.snapshot()).unwrap_or_default(),
            )),
            other => match super::host::call(other, args).await {
                Some(done) => done,
                None => invalid(format!("unknown tool: {other}")),
            },
        }
    }

    async fn flood(&self, id: &Value, count: u64, size: usize, background: bool) -> Done {
        let Some(hooks) = self.hooks.clone() else {
            return tool_error("flood is not supported by this transport");
        };
        if background {
            lock(&self.deferred_work).push(hooks.flood(count, size));
            return Done::Ok(text_result(format!("flooding {count}")));
        }
        self.cancellable(id, async move {
            let sent = hooks.flood(count, size).await;
            Done::Ok(text_result(format!("flooded {sent}/{count}")))
        })
        .await
    }

    fn garbage(&self, kind: &str, mib: usize, out: Option<&Outbound>) -> Done {
        let Some(out) = out else {
            return Done::Err(INVALID_REQUEST, "no channel for related messages".into());
        };
        let line = match kind {
            "invalid" => "this is not JSON {".to_owned(),
            "not_jsonrpc" => r#"{"hello":"this is JSON but not JSON-RPC"}"#.to_owned(),
            "huge" => padded_notification("garbage", 0, mib.saturating_mul(1024 * 1024)),
            "binary" => {
                return match &self.hooks {
                    Some(h) if h.binary_line() => Done::Ok(text_result("garbage binary sent")),
                    _ => tool_error("binary garbage is not supported by this transport"),
                };
            }
            other => return invalid(format!("unknown garbage kind: {other}")),
        };
        // A closed channel means the client went away; the answer is moot then.
        let _ = out.send(line);
        Done::Ok(text_result(format!("garbage {kind} sent")))
    }

    /// Runs `work` unless the request is cancelled or the session ends first.
    async fn cancellable(&self, id: &Value, work: impl Future<Output = Done>) -> Done {
        let token = CancellationToken::new();
        let key = id_key(id);
        lock(&self.inflight).insert(key.clone(), token.clone());
        let _registered = Registered {
            map: &self.inflight,
            key,
        };
        tokio::select! {
            biased;
            () = token.cancelled() => {
                bump(&self.stats.cancelled);
                Done::Silent
            }
            () = self.ended.cancelled() => Done::Silent,
            d = work => d,
        }
    }

    /// Sends a server-to-client request on `out` and waits for the client's
    /// answer; `Err(done)` when it cannot be asked or the session ended.
    async fn ask(
        &self,
        out: Option<&Outbound>,
        request: impl FnOnce(&str) -> String,
    ) -> Result<Result<Value, Value>, Done> {
        let Some(out) = out else {
            return Err(Done::Err(
                INVALID_REQUEST,
                "no channel for server-to-client requests".into(),
            ));
        };
        let sid = self.next_request_id();
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(sid.clone(), Waiter::Call(tx));
        let _registered = Registered {
            map: &self.pending,
            key: sid.clone(),
        };
        if out.send(request(&sid)).is_err() {
            return Err(Done::Silent);
        }
        // An error here means the session ended while waiting.
        rx.await.map_err(|_| Done::Silent)
    }

    async fn sample(&self, prompt: &str, out: Option<&Outbound>) -> Done {
        match self.ask(out, |sid| sampling_request(sid, prompt)).await {
            Ok(Ok(result)) => match result.pointer("/content/text").and_then(Value::as_str) {
                Some(text) => Done::Ok(text_result(text)),
                None => tool_error("sampling result had no content.text"),
            },
            Ok(Err(error)) => tool_error(format!("sampling failed: {error}")),
            Err(done) => done,
        }
    }

    async fn roots(&self, out: Option<&Outbound>) -> Done {
        let request =
            |sid: &str| json!({"jsonrpc": "2.0", "id": sid, "method": "roots/list"}).to_string();
        match self.ask(out, request).await {
            Ok(Ok(result)) => match result.get("roots").and_then(Value::as_array) {
                Some(roots) => {
                    let uris: Vec<&str> = roots
                        .iter()
                        .filter_map(|r| r.get("uri").and_then(Value::as_str))
                        .collect();
                    Done::Ok(text_result(uris.join(",")))
                }
                None => tool_error("roots/list result had no roots array"),
            },
            Ok(Err(error)) => tool_error(format!("roots/list failed: {error}")),
            Err(done) => done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::INVALID_PARAMS;
    use crate::tools::catalogue::LATEST_VERSION;

    fn session() -> McpSession {
        McpSession::new(
            "sid".into(),
            Arc::default(),
            Arc::new(|_| false),
            Arc::default(),
        )
    }

    async fn call(s: &McpSession, method: &str, params: Value) -> Value {
        match s
            .handle_request(&json!(1), method, Some(params), None)
            .await
        {
            Outcome::Reply(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn negotiates_version() {
        let s = session();
        let r = call(&s, "initialize", json!({"protocolVersion": "2025-03-26"})).await;
        assert_eq!(r["result"]["protocolVersion"], "2025-03-26");
        let r = call(&s, "initialize", json!({"protocolVersion": "1999-01-01"})).await;
        assert_eq!(r["result"]["protocolVersion"], LATEST_VERSION);
        assert_eq!(r["result"]["serverInfo"]["name"], "mcpgate-testkit");
    }

    #[tokio::test]
    async fn errors_and_tools() {
        let s = session();
        let r = call(&s, "nope", json!({})).await;
        assert_eq!(r["error"]["code"], METHOD_NOT_FOUND);
        let r = call(&s, "tools/call", json!({"name": "nope"})).await;
        assert_eq!(r["error"]["code"], INVALID_PARAMS);
        let r = call(
            &s,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
        )
        .await;
        assert_eq!(r["result"]["content"][0]["text"], "5");
        let r = call(&s, "tools/list", json!({})).await;
        assert_eq!(r["result"]["tools"].as_array().map(Vec::len), Some(16));
        let r = call(
            &s,
            "prompts/get",
            json!({"name": "greet", "arguments": {"name": "Ann"}}),
        )
        .await;
        assert_eq!(r["result"]["messages"][0]["content"]["text"], "Hello, Ann!");
    }
}
